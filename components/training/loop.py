"""The training loop itself: Keras's fit or the custom loop.

Both loops take the same callbacks (backups, TensorBoard, epoch lines) and report
the same metrics, so `trainer.loop` changes how a step runs, never what is logged.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
import tf_keras
from absl import logging

from tpu_pipeline.common.config import TrainerConfig
from tpu_pipeline.components.device.policy import TrainingPolicy
from tpu_pipeline.components.training.custom_loop import train_custom_loop
from tpu_pipeline.components.training.input_pipeline import EvalInput
from tpu_pipeline.components.training.training_logs import (
    Phase,
    training_callbacks,
    write_run_summaries,
)


def train(
    model: tf_keras.Model,
    train_dataset: tf.distribute.DistributedDataset | tf.data.Dataset,
    eval_input: EvalInput,
    *,
    strategy: tf.distribute.Strategy,
    policy: TrainingPolicy,
    config: TrainerConfig,
    steps_per_epoch: int,
    batch_size: int,
    log_dir: str,
    backup_dir: str,
    phase: Phase | None = None,
    callbacks: tuple[tf_keras.callbacks.Callback, ...] = (),
    run_info: dict[str, Any] | None = None,
    class_names: tuple[str, ...] = (),
) -> tf_keras.callbacks.History:
    """Trains `model` for `config.epochs` epochs of `steps_per_epoch` batches, or one phase's.

    `config.loop` picks Keras's `fit` or the custom loop; both use the same
    callbacks (backups, TensorBoard, epoch lines) and report the same metrics. Each
    epoch validates on every example of `eval_input`. With a fine-tuning `phase`
    only its epochs train, numbered as in the whole run; the profiler traces the
    phase that trains the backbone, the step that costs the most. `callbacks` run after
    the logging ones (a pruned model's step counter). With `run_info` (how the model
    trains) the run is logged and its summaries written to TensorBoard first: the
    configuration, a few eval images and, with `class_names`, the classes.
    """
    if run_info is not None:
        logging.info("Trainer setup: %s", run_info)
        images, labels, *_ = next(iter(eval_input.dataset))
        write_run_summaries(log_dir, images, run_info, labels, class_names)
    first_epoch, end_epoch = (phase.first_epoch, phase.end_epoch) if phase else (0, config.epochs)
    profiles = phase is None or phase.backbone_trainable
    callbacks = training_callbacks(
        log_dir,
        backup_dir,
        config.epochs,
        steps_per_epoch * batch_size,
        config.profile_batches if profiles else None,
        eval_input.examples,
        phase,
    ) + list(callbacks)
    if config.loop == "custom":
        return train_custom_loop(
            model,
            strategy,
            train_dataset,
            strategy.experimental_distribute_dataset(eval_input.dataset),
            epochs=end_epoch,
            initial_epoch=first_epoch,
            steps_per_epoch=steps_per_epoch,
            steps_per_execution=policy.steps_per_execution,
            global_batch_size=batch_size,
            jit_compile=policy.jit_compile,
            callbacks=callbacks,
        )
    return model.fit(
        train_dataset,
        epochs=end_epoch,
        initial_epoch=first_epoch,
        steps_per_epoch=steps_per_epoch,
        validation_data=eval_input.dataset,
        callbacks=callbacks,
        verbose=0,
    )
