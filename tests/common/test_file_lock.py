"""File locks say who holds them, wait a bounded time, and die with their holder."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tpu_pipeline.common.config import REPO_ROOT
from tpu_pipeline.common.file_lock import LockBusyError, held_lock


def test_a_taken_lock_names_its_holder_and_a_bounded_wait_gives_up(tmp_path):
    path = tmp_path / ".lock"
    told = []
    with held_lock(path, "serving rollback"):
        holder = rf"^held by serving rollback \(pid {os.getpid()}, started "
        with pytest.raises(LockBusyError, match=holder), held_lock(path, "run"):
            pass
        started = time.monotonic()
        with pytest.raises(LockBusyError, match=r", still after 0.5 s$"):
            with held_lock(path, "run", wait_seconds=0.5, on_wait=told.append):
                pass
        assert time.monotonic() - started >= 0.5
    assert told == [f"serving rollback (pid {os.getpid()}, started {told[0].split('started ')[1]}"]
    with held_lock(path, "run", wait_seconds=0):  # released: taken at once
        pass


def test_a_lock_whose_holder_was_killed_is_free_at_once(tmp_path):
    path = tmp_path / ".lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import pathlib, sys, time\n"
            "from common.file_lock import held_lock\n"
            "with held_lock(pathlib.Path(sys.argv[1]), 'run'):\n"
            "    print('locked', flush=True); time.sleep(600)",
            str(path),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    assert holder.stdout.readline() == "locked\n"
    holder.kill()
    holder.wait()
    with held_lock(path, "run", wait_seconds=0):
        pass
