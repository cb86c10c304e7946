"""`tpu-pipeline serving` keeps MLflow's model registry in line with what serves.

Against a real MLflow tracking server (`mlflow server` from the venv, SQLite, loopback),
read back through MLflow's own client. The run folder is the serving actions' own test
folder (tests/serving_ops/local/test_actions.py): an ML Metadata store with two blessed
models served as versions 100 and 101, and a model the Evaluator refused.
"""

from __future__ import annotations

import pathlib
import socket

import pytest
from mlflow import MlflowClient

from tests.pipeline.tracking.mlflow_server import mlflow_server
from tests.serving_ops.local.test_actions import passing_check, run_folder, with_a_refused_model
from tpu_pipeline.cli.main import main
from tpu_pipeline.components.serving.publish import pushed_versions


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with mlflow_server(tmp_path_factory.mktemp("mlflow")) as url:
        yield url


@pytest.fixture
def tracked_folder(tmp_path, monkeypatch, server, request):
    """The run folder, MLFLOW_TRACKING_URI set, and a registered model of this test's own."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", server)
    name = request.node.name.replace("_", "-")[:60]
    config_file = tmp_path / "config.yaml"
    config_file.write_text(f"tracking:\n  registered_model: {name}\n  mlflow_experiment: {name}\n")
    config, _, _ = run_folder(tmp_path)
    return config, config_file, name


def serving(config, config_file, *args: str) -> int:
    return main(
        ["serving", *args, "--config", str(config_file), "--output-dir", str(config.output_dir)]
    )


def test_a_manual_blessing_registers_the_published_version_from_what_its_run_logged(
    tracked_folder, server, capsys, monkeypatch, tmp_path
):
    config, config_file, name = tracked_folder
    with_a_refused_model(tmp_path, config)
    passing_check(monkeypatch)

    assert serving(config, config_file, "bless", "--reason", "accepted for the demo") == 0

    out = capsys.readouterr().out.splitlines()
    (published,) = set(pushed_versions(str(config.serving_dir))) - {"100", "101"}
    client = MlflowClient(server)
    version = client.get_model_version_by_alias(name, "serving")
    assert version.tags["serving_version"] == published
    assert version.tags["serving_state"] == "serving"
    assert version.tags["serving_action"] == "bless"
    assert version.tags["serving_reason"] == "accepted for the demo"
    run = client.get_run(version.run_id)
    assert version.source == f"runs:/{run.info.run_id}/model"  # what the run logged
    assert run.info.status == "FINISHED" and run.data.tags["serving_action"] == "bless"
    assert run.info.experiment_id == client.get_experiment_by_name(name).experiment_id
    logged = {a.path for a in client.list_artifacts(run.info.run_id, "model")}
    assert "model/saved_model.pb" in logged
    downloaded = pathlib.Path(client.download_artifacts(run.info.run_id, "model", str(tmp_path)))
    served = config.serving_dir / published
    assert (downloaded / "saved_model.pb").read_bytes() == (served / "saved_model.pb").read_bytes()
    assert out[-2:] == [
        f"registered: {name} version {version.version} from runs:/{run.info.run_id}/model",
        f"MLflow: {name}@serving is version {version.version} (serving {published})",
    ]
    # Only what serves is uploaded: 100 and 101 were never registered, and stay so.
    assert len(client.search_model_versions(f"name='{name}'")) == 1


def test_rollback_pin_and_restore_move_the_serving_alias_and_tag_what_was_set_aside(
    tracked_folder, server, capsys, monkeypatch
):
    config, config_file, name = tracked_folder
    passing_check(monkeypatch)
    client = MlflowClient(server)

    assert serving(config, config_file, "rollback", "--reason", "wrong labels") == 0
    first = client.get_model_version_by_alias(name, "serving")
    assert first.tags["serving_version"] == "100"  # registered as it came to serve
    assert first.tags["serving_action"] == "rollback"

    assert serving(config, config_file, "restore", "101") == 0
    back = client.get_model_version_by_alias(name, "serving")
    assert back.tags["serving_version"] == "101" and back.version != first.version
    assert client.get_model_version(name, first.version).tags["serving_state"] == "in place"

    assert serving(config, config_file, "pin", "100", "--reason", "known good") == 0
    pinned = client.get_model_version_by_alias(name, "serving")
    assert pinned.version == first.version  # the version registered before: no new upload
    assert pinned.tags["serving_state"] == "serving"
    aside = client.get_model_version(name, back.version).tags["serving_state"]
    assert aside.startswith("set aside by pin ") and aside.endswith(": known good")
    assert len(client.search_model_versions(f"name='{name}'")) == 2
    err = capsys.readouterr().err
    assert "warning" not in err


def test_a_tracker_that_is_down_is_one_warning_line_and_the_serving_change_stands(
    tmp_path, monkeypatch, capsys
):
    config, _, _ = run_folder(tmp_path)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{port}")

    code = main(
        ["serving", "rollback", "--reason", "wrong labels", "--output-dir", str(config.output_dir)]
    )

    out, err = capsys.readouterr()
    assert code == 0
    assert "rolled back 101" in out
    assert pushed_versions(str(config.serving_dir)) == ["100"]
    (warning,) = err.splitlines()
    assert warning.startswith(
        f"tpu-pipeline: warning: serving rollback was not recorded in MLflow at 127.0.0.1:{port}: "
    )
    assert warning.endswith("; the serving change stands")


def test_without_a_tracker_a_serving_action_says_nothing_of_one(tmp_path, monkeypatch, capsys):
    config, _, _ = run_folder(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)

    code = main(["serving", "rollback", "--output-dir", str(config.output_dir)])

    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    assert "MLflow" not in out and "registered" not in out
