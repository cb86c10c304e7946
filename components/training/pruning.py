"""Magnitude pruning while training (`trainer.pruning`), with the Model Optimization toolkit.

`prune_for_training` wraps every Conv/Dense layer in tfmot's
`prune_low_magnitude` with a `PolynomialDecay` schedule laid over this run's
training steps; `pruning_callbacks` gives the `UpdatePruningStep` callback both
loops (`fit` and the custom loop) need; `strip_pruned` measures the sparsity
reached and removes the wrappers, so the SavedModel, the TFLite variants and a
later warm start see the plain architecture with zeros in its kernels.

The wrappers advance their step counter and update their masks inside the
training step (assign ops, no host op), so steps_per_execution, XLA and the
custom loop's `strategy.run` all keep the schedule.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow_model_optimization as tfmot
import tf_keras

# The wrapper class is not in tfmot's public API; isinstance checks need it.
from tensorflow_model_optimization.python.core.sparsity.keras.pruning_wrapper import (
    PruneLowMagnitude,
)

from tpu_pipeline.common.config import ConfigError, PruningConfig

_sparsity = tfmot.sparsity.keras
# Mask updates over the pruning window when `frequency` is not set.
UPDATES_BY_DEFAULT = 10


def pruning_schedule(config: PruningConfig, total_steps: int) -> dict[str, int | float]:
    """The schedule's steps for a run of `total_steps` training steps.

    The last mask update falls exactly on `end_step` (the window is a whole
    number of `frequency` steps), so the target sparsity is reached, not
    approached; a window shorter than `frequency` updates every step.
    """
    begin = int(config.begin_fraction * total_steps)
    window = max(1, int(config.end_fraction * total_steps) - begin)
    frequency = config.frequency or max(1, window // UPDATES_BY_DEFAULT)
    if frequency > window:
        frequency = 1
    return {
        "initial_sparsity": config.initial_sparsity,
        "target_sparsity": config.target_sparsity,
        "begin_step": begin,
        "end_step": begin + window // frequency * frequency,
        "frequency": frequency,
    }


def prune_for_training(
    model: tf_keras.Model, config: PruningConfig, total_steps: int
) -> tf_keras.Model:
    """`model` with its prunable layers wrapped for low-magnitude pruning (call in the scope).

    Raises:
      ConfigError: the model has layers tfmot cannot wrap (a subclassed model, a
        custom layer that is not `PrunableLayer`).
    """
    schedule = pruning_schedule(config, total_steps)
    decay = _sparsity.PolynomialDecay(
        initial_sparsity=schedule["initial_sparsity"],
        final_sparsity=schedule["target_sparsity"],
        begin_step=schedule["begin_step"],
        end_step=schedule["end_step"],
        frequency=schedule["frequency"],
    )
    try:
        return _sparsity.prune_low_magnitude(model, pruning_schedule=decay)
    except (ValueError, NotImplementedError) as error:
        first_line = str(error).strip().splitlines()[0]
        raise ConfigError(
            f"trainer.pruning: model {model.name!r} cannot be pruned by the Model Optimization "
            f"toolkit ({first_line}); remove trainer.pruning or use a built-in model"
        ) from None


def pruning_callbacks(config: PruningConfig | None) -> list[tf_keras.callbacks.Callback]:
    """The callbacks a pruned model trains with: none without pruning.

    `UpdatePruningStep` starts the wrappers' step counter and re-applies the
    masks after each epoch's last update, so the weights are sparse when training ends.
    """
    return [_sparsity.UpdatePruningStep()] if config else []


def is_pruned(model: tf_keras.Model) -> bool:
    """Whether `model` (or a model nested in it) still holds pruning wrappers."""
    return any(isinstance(layer, PruneLowMagnitude) for layer in model.submodules)


def measured_sparsity(model: tf_keras.Model) -> float:
    """Fraction of zeros over the weights the wrappers prune (kernels, not biases)."""
    weights = [
        weight.numpy()
        for layer in model.submodules
        if isinstance(layer, PruneLowMagnitude)
        for weight in layer.prunable_weights
    ]
    if not weights:
        return 0.0
    return float(sum(np.sum(w == 0) for w in weights) / sum(w.size for w in weights))


def strip_pruned(
    model: tf_keras.Model, config: PruningConfig, total_steps: int
) -> tuple[tf_keras.Model, dict[str, Any]]:
    """The trained model without wrappers, and what training_info records of its pruning."""
    info = {**pruning_schedule(config, total_steps), "sparsity": measured_sparsity(model)}
    return _sparsity.strip_pruning(model), info
