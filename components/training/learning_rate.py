"""The training recipe: optimizer, and a learning rate that follows the global batch.

The configured peak rate is tuned at one global batch (`learning_rate_batch_size`);
a larger batch (more replicas) takes larger, fewer steps, so the peak rate grows
with it: linearly for SGD (Goyal et al., 2017), by the square root for Adam. Large
peak rates diverge in the first steps, when the weights are random, so the rate
ramps up linearly over `warmup_epochs`, then decays (cosine to zero by default).
A rate that ends near zero lets the last epochs settle instead of bouncing around
the best weights: with a constant rate the final model on MNIST was worse than
its best epoch (docs/benchmarks.md, "Training recipe").
"""

from __future__ import annotations

import math

import tensorflow as tf
import tf_keras

from tpu_pipeline.common.config import TrainerConfig

# Step decay: the rate drops tenfold at each of these fractions of the decay phase.
STEP_DECAY_BOUNDARIES = (0.5, 0.75)


def peak_learning_rate(config: TrainerConfig, global_batch_size: int) -> float:
    """The configured rate scaled from `learning_rate_batch_size` to `global_batch_size`."""
    ratio = global_batch_size / config.learning_rate_batch_size
    scale = {"linear": ratio, "sqrt": math.sqrt(ratio), "none": 1.0}[config.learning_rate_scaling]
    return config.learning_rate * scale


@tf_keras.utils.register_keras_serializable(package="tpu_pipeline")
class WarmupThenDecay(tf_keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup to `peak` over `warmup_steps`, then `decay` until `total_steps`.

    Pure tensor arithmetic on the step counter, so it runs inside an XLA-compiled
    TPU step with no host round trip.
    """

    def __init__(self, peak: float, warmup_steps: int, total_steps: int, decay: str):
        super().__init__()
        self.peak = peak
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps
        self.decay = decay

    def __call__(self, step: tf.Tensor) -> tf.Tensor:
        step = tf.cast(step, tf.float32)
        warmup = float(max(self.warmup_steps, 1))
        # Step 0 already trains, at peak / warmup rather than at zero.
        warming = self.peak * (step + 1.0) / warmup
        progress = tf.clip_by_value(
            (step - self.warmup_steps) / float(max(self.total_steps - self.warmup_steps, 1)),
            0.0,
            1.0,
        )
        if self.decay == "cosine":
            decayed = self.peak * 0.5 * (1.0 + tf.cos(math.pi * progress))
        elif self.decay == "step":
            drops = tf.add_n([tf.cast(progress >= b, tf.float32) for b in STEP_DECAY_BOUNDARIES])
            decayed = self.peak * tf.pow(0.1, drops)
        else:
            decayed = tf.fill([], self.peak)
        return tf.where(step < self.warmup_steps, warming, decayed)

    def get_config(self) -> dict:
        return {
            "peak": self.peak,
            "warmup_steps": self.warmup_steps,
            "total_steps": self.total_steps,
            "decay": self.decay,
        }


def make_optimizer(
    config: TrainerConfig, global_batch_size: int, steps_per_epoch: int, total_steps: int
) -> tf_keras.optimizers.Optimizer:
    """The configured optimizer (Adam, AdamW or SGD with momentum) on the scheduled rate."""
    schedule = WarmupThenDecay(
        peak=peak_learning_rate(config, global_batch_size),
        warmup_steps=min(round(config.warmup_epochs * steps_per_epoch), total_steps),
        total_steps=total_steps,
        decay=config.learning_rate_decay,
    )
    if config.optimizer == "adamw":
        return tf_keras.optimizers.AdamW(schedule, weight_decay=config.weight_decay)
    if config.optimizer == "sgd":
        return tf_keras.optimizers.SGD(schedule, momentum=config.momentum, nesterov=True)
    return tf_keras.optimizers.Adam(schedule)
