"""What the Trainer leaves behind while it trains: TensorBoard logs and backups.

TensorBoard gets what the TPU guides log (loss, accuracy, learning rate, weight
histograms, an optional profiler range) plus sample input images and the run's
configuration, so a person can check the model saw what they think it saw.
Backups let a Trainer that was interrupted resume at its last finished epoch.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import Any

import numpy as np
import tensorflow as tf
import tf_keras
from absl import logging
from tensorboard.plugins.histogram.summary_v2 import histogram_pb

SAMPLE_IMAGE_COUNT = 8
# Values of one weight a histogram is drawn from: TensorBoard's histogram one-hot encodes
# every value into its 30 buckets (its op: 120 bytes a value), which for cnn_bn's
# 25.7M-value Dense kernel at 224x224 took 6 GB at each epoch's end. An evenly strided
# sample of this many values draws the same shape for at most 120 MB.
HISTOGRAM_MAX_VALUES = 1_000_000
# Subfolder of the log dir for summaries written once per run (images, configuration).
RUN_SUMMARY_DIR = "run"


@dataclasses.dataclass(frozen=True)
class Phase:
    """One phase of a fine-tuning schedule (`tpu_pipeline.components.training.fine_tune`).

    Attributes:
      name: what the epoch lines, TensorBoard and training_info call it.
      first_epoch: its first epoch, counted from 0 over the whole run.
      end_epoch: the epoch after its last.
      backbone_trainable: whether the backbone trains in it.
      keep_backup: keep its backup when it ends, so a Trainer restarted in a later
        phase restores this one's result instead of training it again.
    """

    name: str
    first_epoch: int
    end_epoch: int
    backbone_trainable: bool
    keep_backup: bool = False


def _as_code_block(text: str) -> str:
    """TensorBoard renders text as Markdown; a code block keeps columns aligned."""
    return "```\n" + text + "\n```"


class EpochLogger(tf_keras.callbacks.Callback):
    """One compact log line per epoch, instead of Keras's per-step progress bar.

    It also adds the epoch's time and training throughput to the epoch logs, so
    the TensorBoard callback after it records them as `epoch_seconds` and
    `epoch_examples_per_second`: the numbers that show whether a TPU was fed.
    Throughput counts training time only (until validation starts). The line
    says how many eval examples the val_ metrics cover: every one of the split.
    """

    def __init__(
        self, epochs: int, examples_per_epoch: int, eval_examples: int, phase: str | None = None
    ):
        super().__init__()
        self._epochs = epochs
        self._phase = f"{phase}; " if phase else ""
        self._examples_per_epoch = examples_per_epoch
        self._validated = (
            f"val on all {eval_examples} eval examples" if eval_examples else "no eval examples"
        )
        self._started = 0.0
        self._training_seconds: float | None = None

    def on_epoch_begin(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        self._started = time.perf_counter()
        self._training_seconds = None

    def on_test_begin(self, logs: dict[str, float] | None = None) -> None:
        if self._training_seconds is None:
            self._training_seconds = time.perf_counter() - self._started

    def on_epoch_end(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        seconds = time.perf_counter() - self._started
        training_seconds = self._training_seconds or seconds
        examples_per_second = self._examples_per_epoch / max(training_seconds, 1e-9)
        metrics = " ".join(f"{name}={value:.4g}" for name, value in sorted((logs or {}).items()))
        logging.info(
            "epoch %d/%d: %s (%s%.1f s, %.0f examples/s, %s)",
            epoch + 1,
            self._epochs,
            metrics,
            self._phase,
            seconds,
            examples_per_second,
            self._validated,
        )
        if logs is not None:
            logs["seconds"] = seconds
            logs["examples_per_second"] = examples_per_second


class ModelSummaryLogger(tf_keras.callbacks.Callback):
    """Writes Keras's layer-by-layer model summary as TensorBoard text when training starts."""

    def __init__(self, log_dir: str, step: int = 0):
        super().__init__()
        self._log_dir = log_dir
        self._step = step  # a later phase's summary (other trainable counts) sits at its epoch

    def on_train_begin(self, logs: dict[str, float] | None = None) -> None:
        lines: list[str] = []
        self.model.summary(print_fn=lines.append)
        writer = tf.summary.create_file_writer(os.path.join(self._log_dir, RUN_SUMMARY_DIR))
        with writer.as_default(step=self._step):
            tf.summary.text("model_summary", _as_code_block("\n".join(lines)))
        writer.close()


class LearningRateLogger(tf_keras.callbacks.Callback):
    """Adds the optimizer's learning rate to the epoch logs TensorBoard writes."""

    def on_epoch_end(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        if logs is not None:
            learning_rate = self.model.optimizer.learning_rate
            logs["learning_rate"] = float(tf_keras.backend.get_value(learning_rate))


class PhaseLogger(tf_keras.callbacks.Callback):
    """Adds `backbone_trainable` (0 or 1) to the epoch logs: TensorBoard shows when it thawed."""

    def __init__(self, phase: Phase):
        super().__init__()
        self._trainable = float(phase.backbone_trainable)

    def on_epoch_end(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        if logs is not None:
            logs["backbone_trainable"] = self._trainable


class TensorBoard(tf_keras.callbacks.TensorBoard):
    """Keras's TensorBoard callback, with every weight histogram of an epoch written at once,
    each drawn from at most `max_histogram_values` values.

    Speed: Keras writes each weight's histogram with ~15 eager ops, ~2.4 s at each epoch's
    end for ResNet-20's 107 weights on this 2-core machine. A graph of them all costs more
    for a backbone: MobileNetV2's 262 weights took ~35 s to trace and ~30 s to first run,
    in each fine-tuning phase. So the buckets are counted on the host, by TensorBoard's own
    `histogram_pb` (the same buckets as its op), and written as one batch of summaries to
    the same tags in the same run folder. The weights are read to host memory first (as
    `get_weights` does, on every strategy), so nothing runs on an accelerator.

    Memory: a weight larger than `max_histogram_values` is sampled with an even stride
    (see HISTOGRAM_MAX_VALUES), so the one-hot buckets stay bounded.
    """

    def __init__(self, *args, max_histogram_values: int = HISTOGRAM_MAX_VALUES, **kwargs):
        super().__init__(*args, **kwargs)
        self._max_histogram_values = max_histogram_values

    def _log_weights(self, epoch: int) -> None:
        weights = [weight for layer in self.model.layers for weight in layer.weights]
        with self.model.distribute_strategy.scope():
            values = tf_keras.backend.batch_get_value(weights)
        summaries = [
            histogram_pb(
                weight.name.replace(":", "_") + "/histogram", self._sample(value.reshape(-1))
            ).SerializeToString()
            for weight, value in zip(weights, values, strict=True)
        ]
        with self._train_writer.as_default(), tf.summary.record_if(True):
            tf.summary.experimental.write_raw_pb(summaries, step=epoch)
        self._train_writer.flush()

    def _sample(self, flat: np.ndarray) -> np.ndarray:
        """At most `max_histogram_values` of a weight's values, evenly strided (an empty
        weight stays empty: its histogram is all zeros, as TensorBoard's op writes it)."""
        stride = max(1, -(-flat.size // self._max_histogram_values))
        return flat[::stride]


def write_run_summaries(
    log_dir: str,
    sample_images: tf.Tensor,
    run_info: dict[str, Any],
    sample_labels: tf.Tensor | None = None,
    class_names: tuple[str, ...] = (),
) -> None:
    """Writes a few input images, the run configuration and the classes as TensorBoard summaries.

    With `class_names` (in label order), the images' description names each one's
    class and a `classes` text lists every class with its label value.
    """
    images = sample_images[:SAMPLE_IMAGE_COUNT]
    description = None
    if class_names and sample_labels is not None:
        labels = tf.reshape(sample_labels, [-1])[: len(images)].numpy()
        description = "Classes, left to right: " + ", ".join(class_names[i] for i in labels)
    writer = tf.summary.create_file_writer(os.path.join(log_dir, RUN_SUMMARY_DIR))
    with writer.as_default(step=0):
        tf.summary.image(
            "input_samples", images, max_outputs=SAMPLE_IMAGE_COUNT, description=description
        )
        tf.summary.text(
            "run_config", _as_code_block(json.dumps(run_info, indent=2, sort_keys=True))
        )
        if class_names:
            rows = "\n".join(f"| {label} | {name} |" for label, name in enumerate(class_names))
            tf.summary.text("classes", "| label | class |\n| --- | --- |\n" + rows)
    writer.close()


def training_callbacks(
    log_dir: str,
    backup_dir: str,
    epochs: int,
    examples_per_epoch: int,
    profile_batches: tuple[int, int] | None,
    eval_examples: int,
    phase: Phase | None = None,
) -> list[tf_keras.callbacks.Callback]:
    """The callbacks every training run uses, in the order they must run.

    LearningRateLogger, EpochLogger and PhaseLogger come before TensorBoard so the
    learning rate, epoch time, throughput and phase they add to the epoch logs are
    written too. `phase` is the fine-tuning phase being trained, if any.
    """
    phase_loggers = [PhaseLogger(phase)] if phase else []
    return [
        tf_keras.callbacks.BackupAndRestore(
            backup_dir, delete_checkpoint=not (phase and phase.keep_backup)
        ),
        ModelSummaryLogger(log_dir, phase.first_epoch if phase else 0),
        LearningRateLogger(),
        EpochLogger(epochs, examples_per_epoch, eval_examples, phase.name if phase else None),
        *phase_loggers,
        TensorBoard(
            log_dir=log_dir,
            histogram_freq=1,
            update_freq="epoch",
            profile_batch=profile_batches or 0,
        ),
    ]
