"""`tpu-pipeline serving`: the folder operations through the command line, with their exit codes."""

from __future__ import annotations

import pytest

from tests.components.serving.test_publish import Clock, save_model
from tpu_pipeline.cli.main import main
from tpu_pipeline.common.config import load_config
from tpu_pipeline.components.serving.publish import push_model_version
from tpu_pipeline.pipeline.report.run_store import open_latest_run
from tpu_pipeline.pipeline.wiring.node_ids import NodeIds


def passing_check(monkeypatch) -> None:
    """The serving check passes at once (it has its own tests: test_server_check.py)."""
    from tpu_pipeline.components.serving import server_check

    result = server_check.ServingCheckResult(("serving_default",), 0.1, 0.2, "stand-in")
    monkeypatch.setattr(server_check, "check_model", lambda *args: result)


def test_rollback_list_pin_and_restore_through_the_cli(tmp_path, capsys, monkeypatch):
    passing_check(monkeypatch)
    flags = ["--output-dir", str(tmp_path / "output")]
    serving_dir = str(load_config(None, {"output_dir": str(tmp_path / "output")}).serving_dir)
    for i in range(3):
        push_model_version(save_model(tmp_path / f"m{i}", float(i)), serving_dir, Clock(100 + i))

    assert main(["serving", "rollback", "--reason", "wrong labels", *flags]) == 0
    assert "rolled back 102" in capsys.readouterr().out
    assert main(["serving", "list", *flags]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[:2] == ["100  in place", "101  SERVING"]
    assert listed[2].startswith("102  set aside by rollback ") and "wrong labels" in listed[2]

    assert main(["serving", "pin", "100", "--reason", "known good", *flags]) == 0
    assert main(["serving", "restore", "102", *flags]) == 1
    assert "pinned to 100; `tpu-pipeline serving unpin` first" in capsys.readouterr().err
    assert main(["serving", "unpin", *flags]) == 0
    assert main(["serving", "restore", "102", *flags]) == 0
    assert "restored 102 (serving)" in capsys.readouterr().out


def test_moving_versions_of_a_run_never_pushed_names_the_folder_and_creates_nothing(
    tmp_path, capsys
):
    (tmp_path / "output" / "tpu-pipeline-digits").mkdir(parents=True)  # a run, never pushed
    flags = ["--output-dir", str(tmp_path / "output")]

    assert main(["serving", "rollback", "--reason", "typo in the run name", *flags]) == 1
    assert "no serving folder (no model was pushed there)" in capsys.readouterr().err
    assert list((tmp_path / "output").iterdir()) == [tmp_path / "output" / "tpu-pipeline-digits"]
    assert not any((tmp_path / "output" / "tpu-pipeline-digits").iterdir())


def test_serving_takes_the_run_folder_as_report_does_from_any_folder(tmp_path, capsys, monkeypatch):
    run = tmp_path / "output" / "tpu-pipeline-digits"
    push_model_version(save_model(tmp_path / "m", 0.5), str(run / "serving_model"), Clock(100))
    monkeypatch.chdir(tmp_path / "m")  # started from another folder than the run's

    assert main(["serving", "list", str(run)]) == 0
    assert capsys.readouterr().out.splitlines() == ["100  SERVING"]
    assert main(["serving", "pin", str(run), "100", "--reason", "known good"]) == 0
    assert capsys.readouterr().out.startswith("pinned 100;")


@pytest.mark.parametrize(
    "argv",
    [
        ["serving", "list"],  # the run folder of another working folder
        ["serving", "list", "--dataset", "mnist", "--output-dir", "{output}"],
        ["serving", "rollback", "{output}/tpu-pipeline-digitz", "--reason", "typo"],
        ["serving", "list", "{output}/tpu-pipeline-digits", "--dataset", "mnist"],
    ],
)
def test_a_run_that_is_not_there_is_exit_2_in_one_line_and_creates_nothing(
    tmp_path, capsys, monkeypatch, argv
):
    output = tmp_path / "output"
    push_model_version(
        save_model(tmp_path / "m", 0.5),
        str(output / "tpu-pipeline-digits" / "serving_model"),
        Clock(100),
    )
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")

    assert main([word.format(output=output) for word in argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.splitlines()) == 1
    assert "no versions" not in captured.err
    assert sorted(path.name for path in output.iterdir()) == ["tpu-pipeline-digits"]
    assert not (tmp_path / "elsewhere" / "output").exists()


@pytest.mark.slow  # reads the shared digits run
def test_bless_finds_the_model_the_report_names_by_folder_run_folder_or_id(digits_run, capsys):
    config, _ = digits_run
    # The model the Evaluator judged and the report names: the ServingPackager's.
    model = open_latest_run(config.run_dir).first_output(NodeIds.SERVING_PACKAGER, "served_model")
    flags = ["--output-dir", str(config.output_dir), "--reason", "demo"]
    for given in (model.uri, f"{model.uri}/Format-Serving", str(config.run_dir), str(model.id)):
        # The Evaluator blessed the run's model: found, and nothing to do.
        assert main(["serving", "bless", given, *flags]) == 1
        assert capsys.readouterr().err == (
            f"tpu-pipeline: model {model.id} ({model.uri}) is blessed already; nothing to do\n"
        )
