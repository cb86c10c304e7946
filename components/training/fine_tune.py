"""Fine-tuning a pretrained backbone: the new head alone first, then the whole model, slower.

With `trainer.frozen_backbone_epochs` N > 0 a backbone trains in two phases, each
one `train` call (Keras reads `trainable` when it builds the step, so each phase
compiles anew, with an optimizer of its own); every other training is one phase of
all its epochs, compiled the same way (`train_in_phases`):

1. `frozen_backbone`, epochs 1 to N: the backbone frozen, BatchNorm in inference
   mode; the new head learns on pretrained features at the recipe's rate, which
   warms up and decays within the phase.
2. `fine_tune`, epochs N+1 to the end: every backbone layer but BatchNorm trains,
   at `fine_tune_learning_rate_factor` x the recipe's peak rate, again warmed up
   and decayed within the phase, so the pretrained features are adjusted, not
   overwritten by the large updates a random head would send back first.

Each phase backs up into its own subfolder of the backup folder. The first's
backup outlives it: a Trainer restarted during the second phase replays no epoch
of the first (its `train` restores the phase's last state and has no epoch left),
then resumes the second at its last finished epoch. The chief removes the first
phase's backup when the second has finished.
"""

from __future__ import annotations

import os
from typing import Any

import tensorflow as tf
import tf_keras

from tpu_pipeline.common.config import TrainerConfig
from tpu_pipeline.components.device.policy import TrainingPolicy
from tpu_pipeline.components.models import compile_model, freeze_backbone
from tpu_pipeline.components.training.input_pipeline import EvalInput
from tpu_pipeline.components.training.learning_rate import make_optimizer, peak_learning_rate
from tpu_pipeline.components.training.loop import train
from tpu_pipeline.components.training.training_logs import Phase

FROZEN_BACKBONE, FINE_TUNE = "frozen_backbone", "fine_tune"


def fine_tuning_phases(config: TrainerConfig) -> list[Phase]:
    """The schedule's phases; empty without `frozen_backbone_epochs` (one ordinary training)."""
    frozen = config.frozen_backbone_epochs
    if not frozen:
        return []
    fine_tunes = frozen < config.epochs
    phases = [Phase(FROZEN_BACKBONE, 0, frozen, backbone_trainable=False, keep_backup=fine_tunes)]
    if fine_tunes:
        phases.append(Phase(FINE_TUNE, frozen, config.epochs, backbone_trainable=True))
    return phases


def phase_config(config: TrainerConfig, phase: Phase | None) -> TrainerConfig:
    """The recipe one phase trains with: the fine-tuning phase at the lower peak rate."""
    if phase is None or not phase.backbone_trainable:
        return config
    return config.model_copy(
        update={"learning_rate": config.learning_rate * config.fine_tune_learning_rate_factor}
    )


def describe_phases(config: TrainerConfig, global_batch_size: int) -> list[dict[str, Any]]:
    """What training_info records of each phase: its epochs (from 1) and peak rate."""
    phases = [(phase, phase_config(config, phase)) for phase in fine_tuning_phases(config)]
    return [
        {
            "phase": phase.name,
            "epochs": [phase.first_epoch + 1, phase.end_epoch],
            "backbone_trainable": phase.backbone_trainable,
            "peak_learning_rate": peak_learning_rate(recipe, global_batch_size),
        }
        for phase, recipe in phases
    ]


def train_in_phases(
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
    is_chief: bool = True,
    callbacks: tuple[tf_keras.callbacks.Callback, ...] = (),
    training_info: dict[str, Any] | None = None,
    class_names: tuple[str, ...] = (),
) -> tf_keras.callbacks.History:
    """Compiles and trains `model` phase by phase (`fine_tuning_phases`): a pretrained
    backbone's fine-tuning phases, else the one ordinary training of `config.epochs`.

    Args:
      model: built by `task.fit` (a backbone with its pretrained weights), not compiled.
      is_chief: removes the first phase's backup at the end (one worker of several).
      training_info: how the model trains, so far; the schedule's part is added to it
        (`peak_learning_rate`, and each phase's with `fine_tuning`), and the first
        phase logs it and writes it to TensorBoard before training. None: neither.
      Others: as `tpu_pipeline.components.training.loop.train`.
    """
    # No phase (None): the whole run at once, backing up into `backup_dir` itself.
    phases = [(phase, phase_config(config, phase)) for phase in fine_tuning_phases(config)]
    if training_info is not None:
        if phases:
            training_info["fine_tuning"] = describe_phases(config, batch_size)
        training_info["peak_learning_rate"] = peak_learning_rate(config, batch_size)
    # One History over every phase's epochs, as a single `fit` would have returned.
    joined = tf_keras.callbacks.History()
    joined.set_model(model)
    joined.epoch = []
    for index, (phase, recipe) in enumerate(phases or [(None, config)]):
        steps = steps_per_epoch * (phase.end_epoch - phase.first_epoch if phase else config.epochs)
        with strategy.scope():  # the optimizer's variables too
            optimizer = make_optimizer(recipe, batch_size, steps_per_epoch, steps)
            if phase is not None:
                freeze_backbone(model, frozen=not phase.backbone_trainable)
            compile_model(
                model,
                optimizer,
                policy.jit_compile,
                policy.precision,
                policy.steps_per_execution,
                config.label_smoothing,
            )
        history = train(
            model,
            train_dataset,
            eval_input,
            strategy=strategy,
            policy=policy,
            config=config,
            steps_per_epoch=steps_per_epoch,
            batch_size=batch_size,
            log_dir=log_dir,
            backup_dir=os.path.join(backup_dir, phase.name) if phase else backup_dir,
            phase=phase,
            callbacks=callbacks,
            run_info=training_info if index == 0 else None,
            class_names=class_names,
        )
        joined.epoch += history.epoch
        for name, values in history.history.items():
            joined.history.setdefault(name, []).extend(values)
    kept = os.path.join(backup_dir, FROZEN_BACKBONE)
    if is_chief and tf.io.gfile.exists(kept):
        tf.io.gfile.rmtree(kept)
    return joined
