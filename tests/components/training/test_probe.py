"""The recipe's probe: a real model's training steps timed here."""

from tpu_pipeline.common.config import TrainerConfig
from tpu_pipeline.components.device.policy import cpu_precision
from tpu_pipeline.components.models import build_model, training_flops
from tpu_pipeline.components.training import probe
from tpu_pipeline.components.training.probe import (
    PROBE_MAX_BATCH,
    measure_training_rate,
    probe_training_rate,
)


def test_the_probe_times_real_training_steps_and_counts_their_flops():
    rate = measure_training_rate("mnist_cnn", (8, 8, 1), 10, batch_size=16, precision="float32")

    assert rate.images_per_second > 0 and rate.precision == "float32"
    assert rate.training_flops == training_flops(build_model("mnist_cnn", (8, 8, 1), 10))
    assert rate.flops_per_second == rate.images_per_second * rate.training_flops


def test_a_run_probes_in_the_precision_the_trainer_will_use_at_a_bounded_batch(monkeypatch):
    asked = []
    monkeypatch.setattr(probe, "measure_training_rate", lambda *args: asked.append(args))

    probe_training_rate(TrainerConfig(), "fast_cnn", (32, 32, 3), 10, 1024)
    probe_training_rate(TrainerConfig(precision="float32"), "fast_cnn", (32, 32, 3), 10, 64)

    assert asked == [  # this machine has no GPU: its CPU's precision, unless one is set
        ("fast_cnn", (32, 32, 3), 10, PROBE_MAX_BATCH, cpu_precision()),
        ("fast_cnn", (32, 32, 3), 10, 64, "float32"),
    ]
