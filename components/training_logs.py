"""What the Trainer leaves behind while it trains: TensorBoard logs and backups.

TensorBoard gets what the TPU guides log (loss, accuracy, learning rate, weight
histograms, an optional profiler range) plus sample input images and the run's
configuration, so a person can check the model saw what they think it saw.
Backups let a Trainer that was interrupted resume at its last finished epoch.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Any

import tensorflow as tf
import tf_keras
from absl import logging

SAMPLE_IMAGE_COUNT = 8


class EpochLogger(tf_keras.callbacks.Callback):
    """One compact log line per epoch, instead of Keras's per-step progress bar."""

    def __init__(self, epochs: int, examples_per_epoch: int):
        super().__init__()
        self._epochs = epochs
        self._examples_per_epoch = examples_per_epoch
        self._started = 0.0

    def on_epoch_begin(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        self._started = time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        seconds = time.perf_counter() - self._started
        metrics = " ".join(f"{name}={value:.4f}" for name, value in sorted((logs or {}).items()))
        logging.info(
            "epoch %d/%d: %s (%.1f s, %.0f examples/s)",
            epoch + 1,
            self._epochs,
            metrics,
            seconds,
            self._examples_per_epoch / max(seconds, 1e-9),
        )


class LearningRateLogger(tf_keras.callbacks.Callback):
    """Adds the optimizer's learning rate to the epoch logs TensorBoard writes."""

    def on_epoch_end(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        if logs is not None:
            learning_rate = self.model.optimizer.learning_rate
            logs["learning_rate"] = float(tf_keras.backend.get_value(learning_rate))


def backup_dir_for(model_run_dir: str, training_inputs: dict[str, Any]) -> str:
    """A backup folder that stays the same when the same training is retried.

    TFX gives every Trainer attempt a new `model_run_dir`, so a backup kept
    there could never be found again. Keying it by the training inputs lets a
    retry with the same inputs resume, and keeps different trainings apart.
    """
    fingerprint = hashlib.sha256(json.dumps(training_inputs, sort_keys=True).encode()).hexdigest()
    return os.path.join(os.path.dirname(model_run_dir.rstrip("/")), "backup", fingerprint[:16])


def write_run_summaries(log_dir: str, sample_images: tf.Tensor, run_info: dict[str, Any]) -> None:
    """Writes a few input images and the run configuration as TensorBoard summaries."""
    writer = tf.summary.create_file_writer(os.path.join(log_dir, "run"))
    with writer.as_default(step=0):
        tf.summary.image(
            "input_samples", sample_images[:SAMPLE_IMAGE_COUNT], max_outputs=SAMPLE_IMAGE_COUNT
        )
        tf.summary.text(
            "run_config", "```\n" + json.dumps(run_info, indent=2, sort_keys=True) + "\n```"
        )
    writer.close()


def training_callbacks(
    log_dir: str,
    backup_dir: str,
    epochs: int,
    examples_per_epoch: int,
    profile_batches: tuple[int, int] | None,
) -> list[tf_keras.callbacks.Callback]:
    """The callbacks every training run uses, in the order they must run.

    LearningRateLogger comes before TensorBoard so the rate is in the logs it writes.
    """
    return [
        tf_keras.callbacks.BackupAndRestore(backup_dir),
        LearningRateLogger(),
        tf_keras.callbacks.TensorBoard(
            log_dir=log_dir,
            histogram_freq=1,
            update_freq="epoch",
            profile_batch=profile_batches or 0,
        ),
        EpochLogger(epochs, examples_per_epoch),
    ]
