"""A run logged to a real MLflow tracking server, read back through MLflow's own client.

The server is `mlflow server` from the venv (SQLite backend, loopback, started and stopped
here); the run is the session's real digits run (`digits_run`), whose report is written
beside it into a folder of this test's, so the run folder stays as the run left it.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import socket
import threading
import time

import pytest
from mlflow import MlflowClient

from tests.pipeline.tracking.mlflow_server import mlflow_server
from tpu_pipeline.pipeline.report import write_report
from tpu_pipeline.pipeline.tracking import track_run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with mlflow_server(tmp_path_factory.mktemp("mlflow")) as url:
        yield url


@pytest.fixture(scope="module")
def tracked(digits_run, server, tmp_path_factory):
    """digits_run logged to the server as `tpu-pipeline run` logs it: (config, summary, result,
    report folder)."""
    config, summary = digits_run
    report_dir = tmp_path_factory.mktemp("report")
    write_report(config.run_dir, summary, config, output_dir=report_dir)
    tracking = config.tracking.model_copy(update={"mlflow_tracking_uri": server})
    config = config.model_copy(update={"tracking": tracking})
    started = time.monotonic()
    result = track_run(config, summary, report_dir)
    return config, summary, result, report_dir, time.monotonic() - started


def the_run(client: MlflowClient, config):
    experiment = client.get_experiment_by_name(config.full_pipeline_name)
    (run,) = client.search_runs([experiment.experiment_id])
    return run


def test_the_run_appears_with_its_configuration_and_final_metrics(tracked, server):
    config, summary, result, _, seconds = tracked
    assert result.warning is None, result.warning
    client = MlflowClient(server)
    run = the_run(client, config)
    assert result.lines[0] == (
        f"tracked: MLflow run {run.info.run_id} "
        f"({server}/#/experiments/{run.info.experiment_id}/runs/{run.info.run_id})"
    )
    assert run.info.status == "FINISHED" and run.info.run_name.startswith("digits 20")
    params = run.data.params
    # The resolved configuration, field by field, as its own dump shows it.
    assert params["trainer.train_steps"] == "300"
    assert params["dataset.name"] == "digits"
    assert params["evaluator.accuracy_lower_bound"] == str(config.evaluator.accuracy_lower_bound)
    assert params["tracking.mlflow_tracking_uri"] == server
    assert params["trained_with.device"] == "cpu"  # how the Trainer ran
    metrics = run.data.metrics
    assert metrics["eval.accuracy"] == pytest.approx(summary.metrics["accuracy"])
    assert metrics["eval.calibration_error"] == pytest.approx(
        summary.calibration.expected_calibration_error
    )
    assert metrics["blessed"] == 1.0
    three = next(c for c in summary.per_class_metrics if c.class_name == "3")
    assert metrics["eval.class.3.recall"] == pytest.approx(three.recall)
    slice_3 = next(s for s in summary.slices if s.kind == "class" and s.value == "3")
    assert metrics["eval.slice.class.3.accuracy"] == pytest.approx(slice_3.accuracy)
    trainer = next(c for c in summary.components if c.id == "Trainer")
    assert metrics["component.Trainer.seconds"] == pytest.approx(trainer.seconds)
    assert metrics["component.Trainer.peak_rss_mib"] == pytest.approx(
        trainer.peak_rss_bytes / 2**20
    )
    tags = run.data.tags
    assert tags["dataset"] == "digits" and tags["spans"] == "0"
    assert len(tags["input_fingerprint"]) == 12 and len(tags["data_fingerprint"]) == 12
    assert len(tags["code_version"]) >= 16
    assert tags["outcome"] == "blessed and pushed"
    assert tags["blessing_reason"] == summary.blessing_reason
    assert tags["mlflow.note.content"].startswith("**blessed and pushed**")
    print(f"logged in {seconds:.1f} s")


def test_each_epoch_is_a_step_of_the_metric_histories(tracked, server):
    config, summary, *_ = tracked
    client = MlflowClient(server)
    run_id = the_run(client, config).info.run_id
    epochs = config.trainer.epochs
    for name in ("train.loss", "val.accuracy", "learning_rate", "throughput.examples_per_second"):
        history = client.get_metric_history(run_id, name)
        assert [m.step for m in sorted(history, key=lambda m: m.step)] == list(range(1, epochs + 1))
    val = sorted(client.get_metric_history(run_id, "val.accuracy"), key=lambda m: m.step)
    assert val[-1].value > val[0].value  # it learned
    rates = sorted(client.get_metric_history(run_id, "learning_rate"), key=lambda m: m.step)
    assert rates[-1].value < rates[0].value  # the schedule decays


def _listing(client: MlflowClient, run_id: str, path: str | None = None) -> set[str]:
    return {a.path for a in client.list_artifacts(run_id, path)}


def test_the_report_model_card_summary_and_model_are_kept_with_the_run(tracked, server, tmp_path):
    config, summary, _, report_dir, _ = tracked
    client = MlflowClient(server)
    run_id = the_run(client, config).info.run_id
    assert _listing(client, run_id) >= {"report", "model_card", "summary.json", "model"}
    assert {"report/report.html", "report/training.png"} <= _listing(client, run_id, "report")
    assert _listing(client, run_id, "model_card") == {
        "model_card/model_card.json",
        "model_card/model_card.html",
    }
    downloaded = pathlib.Path(client.download_artifacts(run_id, "summary.json", str(tmp_path)))
    assert json.loads(downloaded.read_text())["metrics"] == summary.metrics
    page = client.download_artifacts(run_id, "report/report.html", str(tmp_path))
    assert pathlib.Path(page).read_bytes() == (report_dir / "report.html").read_bytes()
    model = pathlib.Path(client.download_artifacts(run_id, "model", str(tmp_path)))
    served = pathlib.Path(summary.pushed_model)
    for name in ("saved_model.pb", "tflite/measurements.json"):
        assert _digest(model / name) == _digest(served / name)


def _digest(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_pushed_version_is_a_registered_version_from_what_the_run_logged(tracked, server):
    config, summary, result, *_ = tracked
    client = MlflowClient(server)
    run_id = the_run(client, config).info.run_id
    (version,) = client.search_model_versions(f"name='{config.full_pipeline_name}'")
    assert version.source == f"runs:/{run_id}/model"  # not the serving folder: MLflow 3 refuses it
    assert version.run_id == run_id and version.status == "READY"
    assert version.tags["served_folder"] == summary.pushed_model
    assert version.tags["serving_version"] == pathlib.Path(summary.pushed_model).name
    # It serves: the registered model's `serving` alias names it.
    assert version.tags["serving_state"] == "serving"
    serving = client.get_model_version_by_alias(config.full_pipeline_name, "serving")
    assert serving.version == version.version
    assert result.lines[1] == (
        f"registered: {config.full_pipeline_name} version {version.version} "
        f"from runs:/{run_id}/model"
    )


def test_a_tracker_that_is_down_costs_one_warning_within_seconds(digits_run, tmp_path):
    config, summary = digits_run
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    down = config.model_copy(
        update={
            "tracking": config.tracking.model_copy(
                update={"mlflow_tracking_uri": f"http://127.0.0.1:{port}"}
            )
        }
    )
    started = time.monotonic()
    result = track_run(down, summary, tmp_path)
    assert time.monotonic() - started < 15  # MLflow left to itself retries for minutes
    assert result.lines == []
    assert result.warning.startswith(
        f"the run was not logged to MLflow at 127.0.0.1:{port}: MlflowException: "
    )
    assert "\n" not in result.warning


def test_a_tracker_that_accepts_and_never_answers_costs_the_request_timeout(digits_run, tmp_path):
    config, summary = digits_run
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # connections are accepted by the kernel and never answered
        port = silent.getsockname()[1]
        tracking = config.tracking.model_copy(
            update={"mlflow_tracking_uri": f"http://127.0.0.1:{port}", "timeout_seconds": 2}
        )
        started = time.monotonic()
        result = track_run(config.model_copy(update={"tracking": tracking}), summary, tmp_path)
        elapsed = time.monotonic() - started
    assert 2 <= elapsed < 15, elapsed
    assert result.warning.startswith(f"the run was not logged to MLflow at 127.0.0.1:{port}: ")
    assert "timed out" in result.warning.lower() or "timeout" in result.warning.lower()


def test_the_whole_logging_is_bounded_by_the_budget(digits_run, tmp_path, monkeypatch):
    config, summary = digits_run
    import tpu_pipeline.pipeline.tracking.mlflow_log as mlflow_log

    hang = threading.Event()
    monkeypatch.setattr(mlflow_log, "log_to_mlflow", lambda *args: hang.wait())
    tracking = config.tracking.model_copy(
        update={"mlflow_tracking_uri": "http://127.0.0.1:9", "budget_seconds": 0.5}
    )
    result = track_run(config.model_copy(update={"tracking": tracking}), summary, tmp_path)
    hang.set()
    assert result.warning == (
        "the run was not logged to MLflow at 127.0.0.1:9: TimeoutError: logging the run to "
        "MLflow at 127.0.0.1:9: no answer within 0.5 s"
    )


def test_without_a_tracking_uri_nothing_is_logged(digits_run, monkeypatch):
    config, summary = digits_run
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert track_run(config, summary).lines == [] and track_run(config, summary).warning is None


def test_the_run_command_with_the_tracker_down_succeeds_with_one_warning_line(
    digits_run, tmp_path, monkeypatch, capfd
):
    """`tpu-pipeline run` as a user runs it, the pipeline itself replaced by the session's
    finished run (a second real run would cost a minute and test nothing more here)."""
    import tpu_pipeline.pipeline.local.runner
    from tpu_pipeline.cli.main import main

    _, summary = digits_run
    monkeypatch.setattr(
        tpu_pipeline.pipeline.local.runner, "run_local", lambda *args, **kwargs: summary
    )
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{port}")
    code = main(["run", "--output-dir", str(tmp_path / "out"), "--train-steps", "300"])
    out, err = capfd.readouterr()
    assert code == 0
    warnings = [line for line in err.splitlines() if "warning" in line.lower()]
    assert len(warnings) == 1, err
    assert warnings[0].startswith(
        f"tpu-pipeline: warning: the run was not logged to MLflow at 127.0.0.1:{port}: "
    )
    assert warnings[0].endswith("; the run's result stands")
    assert "Traceback" not in err and "blessed: yes" in out
