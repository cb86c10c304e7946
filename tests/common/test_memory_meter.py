"""The memory meter's figures move with memory really allocated, in a fresh process each.

Each case runs in a child Python process: the test session's own high-water
mark (gigabytes after a pipeline run) would hide a few hundred megabytes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tpu_pipeline.common.memory_meter import HIGH_WATER_MARK, SAMPLED, MemoryPeak, highest

MB = 1024 * 1024
PRELUDE = """
import dataclasses, json, subprocess, sys, time
import psutil
from tpu_pipeline.common.memory_meter import MemoryMeter, tensorflow_peaks

def resident():
    return psutil.Process().memory_info().rss

def allocate(megabytes):
    return bytes([1]) * (megabytes * 1024 * 1024)  # every page written, so resident

def peak(meter):
    return dataclasses.asdict(meter.mark())
"""


def measured(script: str, timeout: float = 60, env: dict[str, str] | None = None) -> dict:
    """Runs PRELUDE + `script` in a new Python process (with `env` added to this one's);
    returns the `result` dict it built."""
    code = PRELUDE + textwrap.dedent(script) + "\nprint(json.dumps(result))\n"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
        env={**os.environ, **(env or {})},
    )
    return json.loads(done.stdout.splitlines()[-1])


def test_a_step_that_sets_a_new_high_gets_the_exact_high_water_mark_even_if_freed():
    result = measured(
        """
        with MemoryMeter() as meter:
            meter.mark()
            before = resident()
            block = allocate(300)
            del block  # gone before the mark: only the kernel's high-water mark saw it
            step = peak(meter)
            after = peak(meter)
        result = {"before": before, "step": step, "after": after}
        """
    )
    step, after = result["step"], result["after"]
    assert step["rss_measured"] == HIGH_WATER_MARK
    assert step["rss_bytes"] >= result["before"] + 290 * MB
    # The next step allocates nothing: the freed block is not counted for it.
    assert after["rss_measured"] == SAMPLED
    assert after["rss_bytes"] < result["before"] + 100 * MB


def test_a_step_below_an_earlier_high_gets_the_sampled_peak():
    result = measured(
        """
        with MemoryMeter(sample_seconds=0.05) as meter:
            del_me = allocate(400)
            del del_me
            meter.mark()  # the process's high-water mark is now 400 MB above this
            before = resident()
            block = allocate(150)
            time.sleep(1.0)  # twenty samples see it
            del block
            step = peak(meter)
        result = {"before": before, "step": step}
        """
    )
    step = result["step"]
    assert step["rss_measured"] == SAMPLED
    assert result["before"] + 140 * MB <= step["rss_bytes"] < result["before"] + 350 * MB


CHILD = "import time; block = bytes([1]) * (150 * 1024 * 1024); print('ready', flush=True); " + (
    "time.sleep({seconds})"
)


def test_a_running_child_counts_its_own_peak_not_the_parents_memory():
    result = measured(
        f"""
        held = allocate(500)  # a big parent: a child started by fork+exec must not inherit it
        with MemoryMeter() as meter:
            meter.mark()
            child = subprocess.Popen([sys.executable, "-c", {CHILD.format(seconds=30)!r}],
                                     stdout=subprocess.PIPE, text=True)
            child.stdout.readline()
            step = peak(meter)  # while the child runs
            child.kill(); child.wait()
            peak(meter)  # the step the child ended in (the sampler may have seen it again)
            after = peak(meter)
        result = {{"step": step, "after": after}}
        """
    )
    assert 140 * MB <= result["step"]["child_rss_bytes"] < 400 * MB
    assert result["after"]["child_rss_bytes"] is None  # no child ran in the last step


def test_a_child_that_ended_before_the_mark_was_seen_by_the_sampling_thread():
    result = measured(
        f"""
        with MemoryMeter(sample_seconds=0.05) as meter:
            meter.mark()
            subprocess.run([sys.executable, "-c", {CHILD.format(seconds=2)!r}],
                           stdout=subprocess.DEVNULL, check=True)
            step = peak(meter)
        result = {{"step": step}}
        """
    )
    assert result["step"]["child_rss_bytes"] >= 140 * MB


TENSORFLOW_STEP = """
    import tensorflow as tf
    from tensorflow.python.eager import context
    untouched = tensorflow_peaks()
    still_uninitialised = not context.context()._initialized
    tf.constant(0)
    tensorflow_peaks()
    tensor = tf.ones([100 * 1024 * 1024 // 4])  # 100 MB of float32
    del tensor
    step = tensorflow_peaks()
    after = tensorflow_peaks()
    result = {"untouched": untouched, "uninitialised": still_uninitialised,
              "step": step, "after": after}
    """


# TensorFlow's CPU allocator keeps statistics only with oneDNN on, which TensorFlow
# turns on by itself on some x86 CPUs (Intel's) and not on others (AMD's): each case
# says which it asks for.
@pytest.mark.slow  # imports TensorFlow in a new process (~10 s)
def test_tensorflow_figure_waits_for_the_runtime_then_follows_its_allocator():
    result = measured(TENSORFLOW_STEP, timeout=180, env={"TF_ENABLE_ONEDNN_OPTS": "1"})
    assert result["untouched"] is None and result["uninitialised"]
    assert result["step"]["CPU:0"] >= 100 * MB
    assert result["after"]["CPU:0"] < 10 * MB  # reset after each reading


@pytest.mark.slow  # imports TensorFlow in a new process (~10 s)
def test_tensorflow_figure_is_none_where_the_allocator_keeps_no_statistics():
    result = measured(TENSORFLOW_STEP, timeout=180, env={"TF_ENABLE_ONEDNN_OPTS": "0"})
    assert result["untouched"] is None
    assert result["step"] is None and result["after"] is None


def test_highest_takes_each_figures_largest_and_names_where_the_process_peaked():
    steps = [
        ("Trainer", MemoryPeak(2 * MB, HIGH_WATER_MARK, None, {"CPU:0": 5})),
        ("Pusher", MemoryPeak(1 * MB, SAMPLED, 7 * MB, {"CPU:0": 3, "GPU:0": 9})),
    ]
    assert highest(steps) == (
        MemoryPeak(2 * MB, HIGH_WATER_MARK, 7 * MB, {"CPU:0": 5, "GPU:0": 9}),
        "Trainer",
    )
    assert highest([]) == (None, None)
    assert highest(steps[:1])[0].child_rss_bytes is None
