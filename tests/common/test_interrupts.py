"""Stop signals raise RunInterrupted, even when the process started with SIGINT ignored."""

import os
import signal
import subprocess
import sys

import pytest

from tpu_pipeline.common.interrupts import (
    RunInterrupted,
    exit_code,
    raise_if_interrupted,
    received_signal,
    stop_on_signals,
)


@pytest.fixture
def sigint_ignored():
    """The state a script's background job starts in."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    yield
    signal.signal(signal.SIGINT, previous)


def test_sigint_interrupts_even_a_process_that_started_ignoring_it(sigint_ignored):
    with stop_on_signals():
        with pytest.raises(RunInterrupted, match="interrupted by SIGINT"):
            os.kill(os.getpid(), signal.SIGINT)
            signal.sigtimedwait([], 0)  # a bytecode boundary for the handler to run at
        assert received_signal() == signal.SIGINT
    assert received_signal() is None
    assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN


def test_after_sigterm_nothing_new_starts(sigint_ignored):
    with stop_on_signals():
        with pytest.raises(RunInterrupted):
            os.kill(os.getpid(), signal.SIGTERM)
            signal.sigtimedwait([], 0)
        with pytest.raises(RunInterrupted, match="SIGTERM received: not starting the push"):
            raise_if_interrupted("the push")
    raise_if_interrupted("the push")  # outside the block: no interrupt to honour
    assert (exit_code(signal.SIGINT), exit_code(signal.SIGTERM)) == (130, 143)


def test_a_second_signal_ends_the_process_without_waiting_for_cleanup():
    code = (
        "import os, signal, time\n"
        "from common.interrupts import RunInterrupted, stop_on_signals\n"
        "with stop_on_signals():\n"
        "    try:\n"
        "        os.kill(os.getpid(), signal.SIGINT); time.sleep(5)\n"
        "    except RunInterrupted:\n"
        "        os.kill(os.getpid(), signal.SIGTERM); time.sleep(5)\n"
        "        print('cleanup finished')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 143
    assert "cleanup finished" not in result.stdout
