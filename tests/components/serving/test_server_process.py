"""The check's server process: tied to the process that started it (the kill -9 case is in
test_server_check.py, through the real check)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from components.serving.server_process import _die_with

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_child_whose_parent_died_before_prctl_ran_exits_at_once():
    # Seen from the child, a parent that died already is not the pid that forked it.
    child = subprocess.Popen(SLEEPER, preexec_fn=_die_with(os.getpid() + 1_000_000))
    assert child.wait(timeout=10) == 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_child_of_a_living_parent_runs():
    child = subprocess.Popen(SLEEPER, preexec_fn=_die_with(os.getpid()))
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            child.wait(timeout=1)
    finally:
        child.kill()
        child.wait()
