"""Every command that takes a run takes it the same way; a run that is not there is exit 2."""

from __future__ import annotations

import pytest

from tpu_pipeline.cli.main import main


@pytest.mark.parametrize(
    "command",
    [["report"], ["tensorboard"], ["runs"], ["serving", "list"], ["serving", "unpin"]],
)
def test_every_command_taking_a_run_refuses_a_missing_one_with_exit_2(tmp_path, capsys, command):
    missing = tmp_path / "output" / "tpu-pipeline-digitz"

    assert main([*command, str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"tpu-pipeline: no run folder {missing} (RUN); pass a run folder such as "
        "output/tpu-pipeline-digits, or the --config/--dataset/--output-dir of its run"
    ]
    assert not (tmp_path / "output").exists()


@pytest.mark.parametrize("command", [["report"], ["tensorboard"], ["runs"], ["serving", "list"]])
def test_every_command_taking_a_run_finds_it_from_the_same_flags(tmp_path, capsys, command):
    flags = ["--dataset", "mnist", "--output-dir", str(tmp_path / "output")]

    assert main([*command, *flags]) == 2
    missing = tmp_path / "output" / "tpu-pipeline-mnist"
    assert f"no run folder {missing} (from the configuration)" in capsys.readouterr().err
