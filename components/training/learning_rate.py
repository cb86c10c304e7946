"""The training recipe: optimizer, and a learning rate that follows the global batch.

The configured peak rate is tuned at one global batch (`learning_rate_batch_size`);
a larger batch (more replicas) takes larger, fewer steps, so the peak rate grows
with it: linearly for SGD (Goyal et al., 2017), by the square root for Adam. Large
peak rates diverge in the first steps, when the weights are random, so the rate
ramps up linearly over `warmup_epochs`, then decays (cosine to zero by default).
A rate that ends near zero lets the last epochs settle instead of bouncing around
the best weights: with a constant rate the final model on MNIST was worse than
its best epoch (docs/benchmarks.md, "Training recipe"). Warmup then a linear decay
to zero is the one-cycle schedule short CIFAR-10 runs use (Smith & Topin, 2017).

Weight averaging keeps a moving average of the weights inside the optimizer's step,
so it runs in the compiled step on every device (no host callback between steps):
`ema` exports the average, `lookahead` also restarts training from it every
`LOOKAHEAD_STEPS` steps (Zhang et al., 2019, as the cifar10-airbench recipes do).
"""

from __future__ import annotations

import math

import tensorflow as tf
import tf_keras

from tpu_pipeline.common.config import TrainerConfig

# Step decay: the rate drops tenfold at each of these fractions of the decay phase.
STEP_DECAY_BOUNDARIES = (0.5, 0.75)
# AdamW's decoupled weight decay when `trainer.weight_decay` is unset.
ADAMW_WEIGHT_DECAY = 0.004
# Weight averaging: the average's per-step momentum rises as PEAK x progress^POWER, so the
# first steps (random weights) are soon forgotten and the last ~20 steps are averaged;
# lookahead pulls the weights back to the average every LOOKAHEAD_STEPS steps.
AVERAGE_PEAK_MOMENTUM = 0.95
AVERAGE_MOMENTUM_POWER = 0.6
LOOKAHEAD_STEPS = 5


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
        elif self.decay == "linear":
            decayed = self.peak * (1.0 - progress)
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


def _averaging(optimizer_class: type) -> type:
    """`optimizer_class` keeping a moving average of the weights whose momentum follows
    the run's progress (`AVERAGE_PEAK_MOMENTUM`); Keras's own average has a fixed one."""

    class Averaging(optimizer_class):
        def __init__(self, *args, total_steps: int, **kwargs):
            self._total_steps = max(1, total_steps)
            super().__init__(*args, use_ema=True, ema_momentum=AVERAGE_PEAK_MOMENTUM, **kwargs)

        @property
        def ema_momentum(self):  # read by the base class at every step
            progress = tf.minimum(tf.cast(self.iterations, tf.float32) / self._total_steps, 1.0)
            return self._peak_momentum * progress**AVERAGE_MOMENTUM_POWER

        @ema_momentum.setter
        def ema_momentum(self, value: float) -> None:
            self._peak_momentum = value

        def get_config(self) -> dict:
            config = super().get_config()
            return {**config, "ema_momentum": self._peak_momentum}

    Averaging.__name__ = f"Averaging{optimizer_class.__name__}"
    return Averaging


def make_optimizer(
    config: TrainerConfig, global_batch_size: int, steps_per_epoch: int, total_steps: int
) -> tf_keras.optimizers.Optimizer:
    """The configured optimizer (Adam, AdamW or SGD with momentum) on the scheduled rate,
    with the configured weight decay and weight averaging."""
    schedule = WarmupThenDecay(
        peak=peak_learning_rate(config, global_batch_size),
        warmup_steps=min(round(config.warmup_epochs * steps_per_epoch), total_steps),
        total_steps=total_steps,
        decay=config.learning_rate_decay,
    )
    options: dict = {}
    if config.weight_averaging != "none":
        overwrite = LOOKAHEAD_STEPS if config.weight_averaging == "lookahead" else None
        options = {"total_steps": total_steps, "ema_overwrite_frequency": overwrite}
    if config.optimizer == "adamw":
        decay = ADAMW_WEIGHT_DECAY if config.weight_decay is None else config.weight_decay
        return _optimizer(tf_keras.optimizers.AdamW, options)(
            schedule, weight_decay=decay, **options
        )
    if config.optimizer == "sgd":
        return _optimizer(tf_keras.optimizers.SGD, options)(
            schedule,
            momentum=config.momentum,
            nesterov=True,
            weight_decay=config.weight_decay or None,
            **options,
        )
    return _optimizer(tf_keras.optimizers.Adam, options)(schedule, **options)


def _optimizer(optimizer_class: type, averaging: dict) -> type:
    return _averaging(optimizer_class) if averaging else optimizer_class
