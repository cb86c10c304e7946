"""Bounding calls that have no deadline of their own."""

import threading
import time

import pytest

from tpu_pipeline.common.timeouts import call_with_timeout


def test_returns_the_value_of_a_call_that_finishes_in_time():
    assert call_with_timeout(lambda: 42, 1, "answer") == 42


def test_reraises_the_calls_own_error_unchanged():
    with pytest.raises(KeyError, match="missing"):
        call_with_timeout(lambda: {}["missing"], 1, "lookup")


def test_gives_up_on_a_blocked_call_with_the_chosen_error():
    release = threading.Event()

    class Unreachable(RuntimeError):
        pass

    started = time.perf_counter()
    with pytest.raises(Unreachable, match="probe: no answer within 0.2 s"):
        call_with_timeout(release.wait, 0.2, "probe", on_timeout=Unreachable)
    assert time.perf_counter() - started < 5
    release.set()
