"""How fast this machine trains a model: a few timed steps on random images.

The recipe (`pipeline/wiring/recipe.py`) plans epochs within a time budget before anything
runs, so it needs this device's training rate for the model it picks, at the
precision the Trainer will use. A probe measures it in seconds: one untimed step
(graph building), then a few timed ones. The rate is what this machine gives now,
other work on it included, which is what the run will get.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import tensorflow as tf
import tf_keras

from tpu_pipeline.common.config import TrainerConfig
from tpu_pipeline.components.device.policy import resolve_training_policy
from tpu_pipeline.components.models import build_model, compile_model, training_flops
from tpu_pipeline.components.training.autograph import skip_autograph_for_graph_safe_code

PROBE_STEPS = 3
# The probe's batch: large enough for a CPU's per-image rate, small enough to take seconds.
PROBE_MAX_BATCH = 256


@dataclasses.dataclass(frozen=True)
class TrainingRate:
    """One model's measured training speed here.

    Attributes:
      images_per_second: training images per second of wall time, input not included.
      training_flops: FLOPs of one training image (forward and backward).
      precision: the Keras precision policy it was measured in.
    """

    images_per_second: float
    training_flops: int
    precision: str

    @property
    def flops_per_second(self) -> float:
        return self.images_per_second * self.training_flops


def measure_training_rate(
    model_name: str,
    image_shape: tuple[int, int, int],
    num_classes: int,
    batch_size: int,
    precision: str,
    steps: int = PROBE_STEPS,
) -> TrainingRate:
    """Trains `model_name` on random images for one untimed and `steps` timed steps.

    Args:
      model_name: a built-in model.
      image_shape: one image's shape.
      num_classes: the output layer's size.
      batch_size: images per step (large batches run faster per image on a CPU).
      precision: the Keras precision policy to train in.
      steps: timed steps.
    """
    skip_autograph_for_graph_safe_code()  # ~11 s of converting tf_keras otherwise (STACK.md)
    model = build_model(model_name, image_shape, num_classes, precision)
    compile_model(model, tf_keras.optimizers.SGD(1e-3, momentum=0.9), False, precision)
    rng = np.random.default_rng(0)
    images = tf.constant(rng.random((batch_size, *image_shape), dtype=np.float32))
    labels = tf.constant(np.arange(batch_size) % num_classes)
    model.train_on_batch(images, labels)  # builds the step's graph: not timed
    start = time.perf_counter()
    for _ in range(steps):
        model.train_on_batch(images, labels)
    seconds = time.perf_counter() - start
    return TrainingRate(steps * batch_size / seconds, training_flops(model), precision)


def probe_training_rate(
    trainer: TrainerConfig,
    model_name: str,
    image_shape: tuple[int, int, int],
    num_classes: int,
    batch_size: int,
) -> TrainingRate:
    """`measure_training_rate` on this machine's GPU or CPU, in the precision the Trainer will
    use there (`trainer.precision`, else the device's), at most PROBE_MAX_BATCH images a step."""
    device = "gpu" if tf.config.list_physical_devices("GPU") else "cpu"
    precision = resolve_training_policy(device, 1, trainer).precision
    batch = min(batch_size, PROBE_MAX_BATCH)
    return measure_training_rate(model_name, image_shape, num_classes, batch, precision)
