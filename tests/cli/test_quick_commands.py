"""Commands that only read a run folder answer without TensorFlow and without library noise.

Each runs `tpu-pipeline` in a fresh process, as a person would, and then asks
that process which heavy libraries it loaded. TensorFlow's import alone costs
10-30 s here and prints a screen of start-up lines on stderr, so a command
that reads folders and ML Metadata must not load it (nor TFMA or Beam).
"""

from __future__ import annotations

import getpass
import os
import socket
import subprocess
import sys

import pytest

from tests.serving_ops.local.test_actions import run_folder, with_a_refused_model
from tpu_pipeline.common.config import REPO_ROOT
from tpu_pipeline.serving_ops.local import actions as serving_actions

HEAVY = ("tensorflow", "tensorflow_model_analysis", "apache_beam", "tfx.dsl.io.fileio")
# Runs the command's main() in this child, then prints what it loaded on a last line.
_PROBE = f"""
import sys
from tpu_pipeline.cli.main import main
code = main(sys.argv[1:])
print("loaded:", *sorted(m for m in {HEAVY!r} if m in sys.modules), flush=True)
sys.exit(code)
"""
ENV = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "PYTHONWARNINGS")}


def run_command(*args: str) -> tuple[int, list[str], list[str], str]:
    """(exit code, stdout lines, stderr lines, the heavy modules it loaded)."""
    child = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        env={**ENV, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    *out, loaded = child.stdout.splitlines()
    return child.returncode, out, child.stderr.splitlines(), loaded.removeprefix("loaded:").strip()


@pytest.fixture(scope="module")
def served_run(tmp_path_factory):
    """A run folder serving two models and, as version 3, a third blessed by hand.

    Returns (config, the first model's id, the hand-blessed model's id, its version).
    """
    from tests.cli.test_serving_commands import passing_check

    tmp_path = tmp_path_factory.mktemp("served")
    config, older, _ = run_folder(tmp_path)
    refused = with_a_refused_model(tmp_path, config)
    with pytest.MonkeyPatch.context() as monkeypatch:
        passing_check(monkeypatch)
        lines = serving_actions.bless(config, "accepted for the demo", refused)
    version = lines[-2].split()[3].rstrip(":")  # "pushed as version V: DIR"
    return config, older, refused, version


def test_serving_list_reads_versions_and_metadata_without_tensorflow(served_run):
    config, _, refused, version = served_run
    code, out, err, loaded = run_command("serving", "list", "--output-dir", str(config.output_dir))
    assert (code, err, loaded) == (0, [], "")
    assert out[:2] == ["100  in place", "101  in place"]  # pushed without ML Metadata's record
    who = f"{getpass.getuser()}@{socket.gethostname()}"
    assert out[2] == (
        f"{version}  SERVING  (blessed by hand by {who}: accepted for the demo; "
        f"model {refused} in ML Metadata)"
    )


def test_serving_list_of_a_run_never_pushed_says_so_without_tensorflow(tmp_path):
    (tmp_path / "tpu-pipeline-digits").mkdir()  # a run folder whose runs pushed nothing
    code, out, err, loaded = run_command("serving", "list", "--output-dir", str(tmp_path))
    assert (code, err, loaded) == (0, [], "")
    assert out == [f"{tmp_path}/tpu-pipeline-digits/serving_model: no versions"]


@pytest.mark.parametrize(
    "args, said",
    [
        (("serving", "unpin"), "nothing was pinned"),
        (("serving", "bless", "OLDER", "--reason", "demo"), "is blessed already"),
        (("serving", "bless", "SERVED", "--reason", "demo"), "is blessed already"),
        (("serving", "bless", "--model-id", "99", "--reason", "demo"), "no model 99 of pipeline"),
    ],
)
def test_serving_commands_that_change_nothing_answer_without_tensorflow(served_run, args, said):
    config, older, _, _ = served_run
    named = {"OLDER": str(older), "SERVED": str(config.serving_dir / "101")}  # a copy of newer
    args = [named.get(arg, arg) for arg in args]
    code, out, err, loaded = run_command(*args, "--output-dir", str(config.output_dir))
    assert loaded == ""
    assert said in "\n".join(out + err)
    assert len(err) <= 1  # a refusal is its one line, nothing else


def test_data_generate_writes_files_without_tensorflow(tmp_path):
    folder = tmp_path / "d"
    args = ["--format", "image_folder", "--count", "10", "--output", str(folder)]
    code, out, err, loaded = run_command("data", "generate", *args)
    assert (code, err, loaded) == (0, [], "")
    assert out == [f"wrote 10 synthetic mnist images as image_folder to {folder}"]


@pytest.mark.slow  # reads the shared digits run
def test_tensorboard_prints_its_command_without_tensorflow(digits_run):
    config, _ = digits_run
    code, out, err, loaded = run_command("tensorboard", str(config.run_dir))
    assert (code, err, loaded) == (0, [], "")
    (line,) = out
    assert line.startswith(f"tensorboard --logdir {config.pipeline_root}/Trainer/model_run/")


def test_rollback_and_a_pin_in_place_answer_without_tensorflow(tmp_path):
    """Neither runs the serving check (nothing comes back from aside), so neither loads TF."""
    config, _, _ = run_folder(tmp_path)
    where = ("--output-dir", str(config.output_dir))
    code, out, err, loaded = run_command("serving", "rollback", "--reason", "wrong labels", *where)
    assert (code, err, loaded) == (0, [], "")
    assert out[0].startswith("rolled back 101 to ") and out[0].endswith("; serving 100")
    code, out, err, loaded = run_command("serving", "pin", "100", "--reason", "freeze", *where)
    assert (code, err, loaded) == (0, [], "")
    assert out[-1] == "pinned 100; runs push nothing until `serving unpin`"


def test_compile_prints_its_line_and_none_of_tensorflows_start_up(tmp_path):
    from tests.kubeflow.conftest import own_project_config

    config = own_project_config(tmp_path)
    code, out, err, _ = run_command(
        "compile", "--config", str(config), "--output", str(tmp_path / "pipeline.json")
    )
    assert (code, err) == (0, [])  # no "Unable to register cuDNN factory", no WARNING:tensorflow
    (line,) = out
    assert line.startswith(f"wrote {tmp_path / 'pipeline.json'}: 13 tasks")


@pytest.mark.slow  # reads the shared digits run
def test_report_prints_its_line_and_none_of_tensorflows_start_up(digits_run, tmp_path):
    config, _ = digits_run
    code, out, err, _ = run_command("report", str(config.run_dir), "--output", str(tmp_path))
    assert (code, err) == (0, [])
    assert out == [f"report: {tmp_path / 'report.html'}"]
