"""The recipe's probe: a real model's training steps timed here."""

import time

import pytest

from tpu_pipeline.common.config import TrainerConfig
from tpu_pipeline.components.device.policy import cpu_precision
from tpu_pipeline.components.models import build_model, training_flops
from tpu_pipeline.components.training import probe
from tpu_pipeline.components.training.probe import (
    PROBE_BUDGET_SHARE,
    PROBE_MAX_BATCH,
    PROBE_SECONDS,
    measure_training_rate,
    probe_training_rate,
)


def test_the_probe_times_real_training_steps_and_counts_their_flops():
    rate = measure_training_rate(
        "mnist_cnn", (8, 8, 1), 10, batch_size=16, precision="float32", seconds=0
    )

    assert rate.images_per_second > 0 and rate.precision == "float32"
    assert rate.float32_inference_images_per_second > 0
    assert rate.training_flops == training_flops(build_model("mnist_cnn", (8, 8, 1), 10))
    assert rate.flops_per_second == rate.images_per_second * rate.training_flops


def test_the_float32_forward_pass_is_timed_whatever_precision_training_is_probed_in(
    monkeypatch,
):
    built = []

    def recorded_build(name, shape, classes, precision="float32"):
        built.append(precision)
        return build_model(name, shape, classes, precision)

    monkeypatch.setattr(probe, "build_model", recorded_build)
    rate = measure_training_rate(
        "mnist_cnn", (8, 8, 1), 10, batch_size=16, precision="mixed_bfloat16", seconds=0
    )

    assert built == ["mixed_bfloat16", "float32"]  # the trained model, then the timed forward
    assert rate.precision == "mixed_bfloat16" and rate.float32_inference_images_per_second > 0


def test_a_run_probes_in_the_precision_the_trainer_will_use_at_a_bounded_batch(monkeypatch):
    asked = []
    monkeypatch.setattr(
        probe, "measure_training_rate", lambda *args, seconds: asked.append((*args, seconds))
    )

    probe_training_rate(TrainerConfig(), "fast_cnn", (32, 32, 3), 10, 1024)
    probe_training_rate(
        TrainerConfig(precision="float32", time_budget_minutes=1), "fast_cnn", (32, 32, 3), 10, 64
    )

    assert asked == [  # this machine has no GPU: its CPU's precision, unless one is set
        ("fast_cnn", (32, 32, 3), 10, PROBE_MAX_BATCH, cpu_precision(), PROBE_SECONDS),
        # A short budget, a shorter probe: its share of the minute.
        ("fast_cnn", (32, 32, 3), 10, 64, "float32", pytest.approx(60 * PROBE_BUDGET_SHARE)),
    ]


def test_the_stopwatch_times_the_fewest_steps_and_then_until_its_seconds_are_filled():
    quick = probe.Stopwatch(min_steps=3, min_seconds=0)
    quick.start()
    assert [quick.step_done() for _ in range(3)] == [False, False, True]

    slow = probe.Stopwatch(min_steps=3, min_seconds=0.2)
    slow.start()
    steps = 1
    while not slow.step_done():
        time.sleep(0.01)
        steps += 1
    assert steps >= 15 and slow.seconds >= 0.2  # 10 ms steps: far more than the 3 asked
    assert 0 < slow.rate(images_per_step=10) <= 10 * steps / 0.2


def test_the_probe_times_fit_from_its_second_step_and_stops_it_once_timed(monkeypatch):
    watches = []

    class Recorded(probe.Stopwatch):
        def __init__(self, *args):
            super().__init__(*args)
            watches.append(self)

    monkeypatch.setattr(probe, "Stopwatch", Recorded)
    monkeypatch.setattr(probe, "_UNBOUNDED_STEPS", 100_000)

    rate = measure_training_rate(
        "mnist_cnn", (8, 8, 1), 10, batch_size=16, precision="float32", seconds=0.3
    )

    training, forward = watches
    assert training.seconds >= 0.3 and 3 <= training.steps < 100_000 - 1  # fit was stopped
    assert rate.images_per_second == training.rate(16)
    assert forward.seconds >= 0.3 * probe.INFERENCE_SHARE
