"""How fast this machine trains a model: a few seconds of timed steps on random images.

The recipe (`pipeline/wiring/recipe.py`) plans epochs within a time budget before anything
runs, so it needs this device's training rate for the model it picks, at the
precision the Trainer will use. A probe measures it in seconds: Keras's own `fit` loop,
as the Trainer runs it, one untimed step (graph building), then timed ones. The rate is
what this machine gives now, other work on it included, which is what the run will get.
(`train_on_batch` was 25-40 % slower a step than `fit` here: its per-call set-up.)

It also times the model's float32 forward pass: the work after training (the export's
checks, the TFLite variants and their measurements, the Evaluator, attributions) runs
the model in float32 whatever precision it trained in, so a CPU whose bfloat16 units
make training 2-3x faster does that work no faster (docs/benchmarks.md, "CIFAR-10").
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

# Timed steps: at least this many, and as many more as fill the probe's seconds. A CPU
# shared with other work runs some steps at half speed (405 or 700 images/s, step by step,
# here): three `train_on_batch` steps planned a 15-minute run for 473 images/s whose
# epochs ran at 700. Seconds of steps average such swings out as an epoch does.
PROBE_STEPS = 3
# The probe's seconds of training steps: this share of the run's time budget, at most
# PROBE_SECONDS (3 s of a 15-minute budget, 4 s from 20 minutes; 0.2 s of a 1-minute one).
PROBE_SECONDS = 4.0
PROBE_BUDGET_SHARE = 1 / 300
# The float32 forward pass is timed for this share of the training steps' seconds: a
# pass costs about a third of a step.
INFERENCE_SHARE = 1 / 3
# The probe's batch: large enough for a CPU's per-image rate, small enough to take seconds.
PROBE_MAX_BATCH = 256


@dataclasses.dataclass(frozen=True)
class TrainingRate:
    """One model's measured training speed here.

    Attributes:
      images_per_second: training images per second of wall time, input not included.
      training_flops: FLOPs of one training image (forward and backward).
      precision: the Keras precision policy it was measured in.
      float32_inference_images_per_second: images per second of the model's float32
        forward pass, the rate of the work after training.
    """

    images_per_second: float
    training_flops: int
    precision: str
    float32_inference_images_per_second: float

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
    seconds: float = PROBE_SECONDS,
) -> TrainingRate:
    """Trains `model_name` on random images for one untimed step and then at least `steps`
    timed ones filling `seconds`; then times its float32 forward pass the same way.

    Args:
      model_name: a built-in model.
      image_shape: one image's shape.
      num_classes: the output layer's size.
      batch_size: images per step (large batches run faster per image on a CPU).
      precision: the Keras precision policy to train in.
      steps: the fewest timed steps.
      seconds: the least time the timed steps fill.
    """
    skip_autograph_for_graph_safe_code()  # ~11 s of converting tf_keras otherwise (STACK.md)
    model = build_model(model_name, image_shape, num_classes, precision)
    compile_model(model, tf_keras.optimizers.SGD(1e-3, momentum=0.9), False, precision)
    rng = np.random.default_rng(0)
    images = tf.constant(rng.random((batch_size, *image_shape), dtype=np.float32))
    labels = tf.constant(np.arange(batch_size) % num_classes)
    timer = _TimedSteps(Stopwatch(steps, seconds))
    batches = tf.data.Dataset.from_tensors((images, labels)).repeat()
    model.fit(batches, steps_per_epoch=_UNBOUNDED_STEPS, verbose=0, callbacks=[timer])
    return TrainingRate(
        images_per_second=timer.stopwatch.rate(batch_size),
        training_flops=training_flops(model),
        precision=precision,
        float32_inference_images_per_second=_float32_inference_rate(
            model_name, images, num_classes, seconds * INFERENCE_SHARE
        ),
    )


# `fit`'s epoch length for the probe: the stopwatch ends it long before.
_UNBOUNDED_STEPS = 1_000_000


class Stopwatch:
    """Times steps: at least `min_steps` of them, and until `min_seconds` have passed."""

    def __init__(self, min_steps: int, min_seconds: float):
        self.min_steps, self.min_seconds = min_steps, min_seconds
        self.steps, self.started, self.seconds = 0, 0.0, 0.0

    def start(self) -> None:
        self.steps, self.started = 0, time.perf_counter()

    def step_done(self) -> bool:
        """Counts one step; whether enough steps and seconds have been timed."""
        self.steps += 1
        self.seconds = time.perf_counter() - self.started
        return self.steps >= self.min_steps and self.seconds >= self.min_seconds

    def rate(self, images_per_step: int) -> float:
        return self.steps * images_per_step / self.seconds


class _TimedSteps(tf_keras.callbacks.Callback):
    """Starts the stopwatch when `fit`'s first step (graph building) ends; stops `fit`
    when the stopwatch has timed enough."""

    def __init__(self, stopwatch: Stopwatch):
        super().__init__()
        self.stopwatch, self._building = stopwatch, True

    def on_train_batch_end(self, batch, logs=None):
        if self._building:
            self._building = False
            self.stopwatch.start()
        elif self.stopwatch.step_done():
            self.model.stop_training = True


def _float32_inference_rate(
    model_name: str, images: tf.Tensor, num_classes: int, seconds: float
) -> float:
    """Images per second of a float32 build of `model_name` classifying `images`."""
    model = build_model(model_name, tuple(images.shape[1:]), num_classes, "float32")
    forward = tf.function(lambda batch: model(batch, training=False))
    forward(images)  # builds the graph: not timed
    stopwatch = Stopwatch(PROBE_STEPS, seconds)
    stopwatch.start()
    while True:
        forward(images).numpy()
        if stopwatch.step_done():
            return stopwatch.rate(int(images.shape[0]))


def probe_training_rate(
    trainer: TrainerConfig,
    model_name: str,
    image_shape: tuple[int, int, int],
    num_classes: int,
    batch_size: int,
) -> TrainingRate:
    """`measure_training_rate` on this machine's GPU or CPU, in the precision the Trainer will
    use there (`trainer.precision`, else the device's), at most PROBE_MAX_BATCH images a step,
    for the share of `trainer.time_budget_minutes` the probe may take."""
    device = "gpu" if tf.config.list_physical_devices("GPU") else "cpu"
    precision = resolve_training_policy(device, 1, trainer).precision
    batch = min(batch_size, PROBE_MAX_BATCH)
    seconds = PROBE_SECONDS
    if trainer.time_budget_minutes is not None:
        seconds = min(seconds, trainer.time_budget_minutes * 60 * PROBE_BUDGET_SHARE)
    return measure_training_rate(
        model_name, image_shape, num_classes, batch, precision, seconds=seconds
    )
