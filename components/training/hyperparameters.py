"""The Trainer settings a search chose, and where its trials are recorded.

The Tuner's search space is keyed by TrainerConfig field names, so applying the
best trial (in the Trainer) or a trial's values (in the Tuner) is replacing
those fields; KerasTuner's own entries (Hyperband's `tuner/epochs`, ...) are its
bookkeeping and are left out. This module stays light (no KerasTuner, no
TensorFlow), so the run summary can read trial records without loading them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from tpu_pipeline.common.config import TrainerConfig

KERAS_TUNER_PREFIX = "tuner/"
TRIALS_SUBDIR = "trials"  # of the Tuner's `tuner_results` artifact
TRIAL_RECORD = "trial.json"  # in each trial's folder, beside its TensorBoard run


def trial_dir(trials_dir: str, trial_id: str) -> str:
    """One trial's folder: its TensorBoard run (train/, validation/, run/) and its record."""
    return os.path.join(trials_dir, f"trial_{trial_id}")


def tuned_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """The TrainerConfig fields among KerasTuner's `values`."""
    return {name: v for name, v in values.items() if not name.startswith(KERAS_TUNER_PREFIX)}


def apply_hyperparameters(config: TrainerConfig, values: Mapping[str, Any]) -> TrainerConfig:
    """`config` with the tuned fields replaced, validated like the configuration file.

    Raises:
      pydantic.ValidationError: a value is not allowed for its field, naming it.
    """
    return TrainerConfig.model_validate({**config.model_dump(), **tuned_values(values)})


def format_value(value: Any) -> str:
    """A searched value for people: floats to 4 significant digits."""
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def describe_values(values: Mapping[str, Any]) -> str:
    """`name=value, ...` in name order, for log lines and the run summary."""
    return ", ".join(f"{name}={format_value(value)}" for name, value in sorted(values.items()))
