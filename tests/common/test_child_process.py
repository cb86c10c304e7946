"""Child processes tied to the process that started them (the kill -9 cases are in
test_server_check.py and test_training_process.py, through the real callers)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tpu_pipeline.common.child_process import die_with

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_child_whose_parent_died_before_prctl_ran_exits_at_once():
    # Seen from the child, a parent that died already is not the pid that forked it.
    child = subprocess.Popen(SLEEPER, preexec_fn=die_with(os.getpid() + 1_000_000))
    assert child.wait(timeout=10) == 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_child_of_a_living_parent_runs():
    child = subprocess.Popen(SLEEPER, preexec_fn=die_with(os.getpid()))
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            child.wait(timeout=1)
    finally:
        child.kill()
        child.wait()
