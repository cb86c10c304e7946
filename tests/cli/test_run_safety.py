"""`tpu-pipeline run` under the faults operators meet: Ctrl-C, SIGTERM, two runs, a bad store.

Through the real command, in its own process group, as a shell would run it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.common.webhook_server import webhook_server
from tpu_pipeline.common.run_lock import exclusive_run
from tpu_pipeline.pipeline.wiring.input_fingerprint import LAST_SUCCESS_FILE

RUN_DIR_NAME = "tpu-pipeline-digits"


def start_cli(*args: str, ignore_sigint: bool = False) -> subprocess.Popen:
    """Starts the command in a new process group, output (both streams) on one pipe.

    `ignore_sigint` starts it the way a script's background job starts: with
    SIGINT ignored, which Python honours unless the program installs a handler.
    """

    def before_exec() -> None:
        if ignore_sigint:
            signal.signal(signal.SIGINT, signal.SIG_IGN)

    return subprocess.Popen(
        [sys.executable, "-m", "tpu_pipeline.cli.main", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=before_exec,
    )


def signal_at_first_epoch(process: subprocess.Popen, signum: int) -> tuple[list[str], str]:
    """Sends `signum` to the process group when the first epoch line appears.

    Returns every output line and that epoch line.
    """
    lines, epoch_line = [], ""
    for line in process.stdout:
        lines.append(line)
        if not epoch_line and re.match(r"\s+epoch \d+/\d+: ", line):
            epoch_line = line
            os.killpg(process.pid, signum)
    process.wait(timeout=120)
    return lines, epoch_line


def run_args(tmp_path, summary: str) -> list[str]:
    # Epochs of 10 steps: the first one (and its backup) ends within a second of the Trainer's
    # start, and 300 of them cannot finish before the signal lands.
    return [
        "run",
        "--output-dir",
        str(tmp_path / "out"),
        "--train-steps",
        "3000",
        "--set",
        "trainer.epochs=300",
        "--summary-json",
        str(tmp_path / summary),
    ]


def hold_lock_and_die_by_kill_9(run_dir) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import pathlib, sys, time\n"
            "from common.run_lock import exclusive_run\n"
            f"with exclusive_run(pathlib.Path({str(run_dir)!r})):\n"
            "    print('locked', flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline() == "locked\n"
    holder.kill()
    holder.wait()


@pytest.mark.slow
def test_sigint_then_sigterm_during_the_trainer_stop_the_run_and_push_nothing(tmp_path):
    run_dir = tmp_path / "out" / RUN_DIR_NAME
    hold_lock_and_die_by_kill_9(run_dir)  # a lock left by a dead run must not block

    # Started as a script's background job (SIGINT ignored), where Ctrl-C used to do nothing.
    with webhook_server() as (url, webhook):
        notify = ["--set", f"notify.webhook={url}"]
        first = start_cli(*run_args(tmp_path, "first.json"), *notify, ignore_sigint=True)
        lines, epoch_line = signal_at_first_epoch(first, signal.SIGINT)
    output = "".join(lines)
    ((_, message),) = webhook.received  # told once, however the run ended
    assert message["text"].splitlines()[:2] == [
        f"tpu-pipeline tpu-pipeline-digits on {socket.gethostname()}: *interrupted*",
        "by SIGINT during Trainer; the same command resumes it",
    ]
    assert not (run_dir / LAST_SUCCESS_FILE).exists()  # `--if-new-data` would run it again
    assert epoch_line, output
    assert first.returncode == 130, output
    assert "INTERRUPTED by SIGINT during Trainer" in output
    summary = json.loads((tmp_path / "first.json").read_text())
    statuses = {c["id"]: c["status"] for c in summary["components"]}
    assert statuses["Trainer"] == "interrupted"
    assert statuses["Evaluator"] == statuses["Pusher"] == "skipped"
    assert summary["pushed_model"] is None
    assert not (run_dir / "serving_model").exists()

    # The rerun resumes after the last finished epoch, and SIGTERM stops it the same way.
    second = start_cli(*run_args(tmp_path, "second.json"))
    lines, epoch_line = signal_at_first_epoch(second, signal.SIGTERM)
    output = "".join(lines)
    assert second.returncode == 143, output
    assert not epoch_line.strip().startswith("epoch 1/"), output
    summary = json.loads((tmp_path / "second.json").read_text())
    assert summary["interrupted"] == "SIGTERM during Trainer"
    assert {c["id"]: c["status"] for c in summary["components"]}["Transform"] == "cached"
    assert not (run_dir / "serving_model").exists()


def test_a_second_run_on_the_same_folder_refuses_at_once_naming_the_first(tmp_path):
    run_dir = tmp_path / "out" / RUN_DIR_NAME
    with exclusive_run(run_dir):
        started = time.perf_counter()
        second = start_cli("run", "--output-dir", str(tmp_path / "out"))
        output, _ = second.communicate(timeout=120)
        refused_after = time.perf_counter() - started
    assert second.returncode == 1, output
    (line,) = output.splitlines()
    assert f"{run_dir} is in use by another run (pid {os.getpid()}, started " in line
    assert not (run_dir / "metadata.sqlite").exists()
    print(f"refused after {refused_after:.1f} s")  # the command's own start-up, no pipeline


def test_a_damaged_metadata_store_is_named_and_left_in_place(tmp_path):
    run_dir = tmp_path / "out" / RUN_DIR_NAME
    run_dir.mkdir(parents=True)
    store = run_dir / "metadata.sqlite"
    damaged = b"SQLite format 3\x00" + bytes(range(256)) * 64
    store.write_bytes(damaged)
    result = start_cli("run", "--output-dir", str(tmp_path / "out"))
    output, _ = result.communicate(timeout=120)
    assert result.returncode == 1, output
    (line,) = output.splitlines()
    assert line.startswith(f"tpu-pipeline: {store} is damaged (")
    assert f"mv {store} {store}.damaged" in line
    assert store.read_bytes() == damaged
