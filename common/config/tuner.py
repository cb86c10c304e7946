"""The `tuner:` section: a hyperparameter search over the fields of the `trainer:` section."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from tpu_pipeline.common.config.base import _Section
from tpu_pipeline.common.config.trainer import TrainerConfig

# What the Trainer's fit logs for the eval split; accuracy is maximised, loss minimised.
TunerObjective = Literal["val_accuracy", "val_loss"]
# TrainerConfig fields a search may not vary: they choose the device or the bookkeeping,
# fix what every trial is measured on, or set the length (trials: `tuner.trial_steps`); the
# pretrained weights are a file every trial must start from, not a value to search.
UNTUNABLE_TRAINER_FIELDS = frozenset(
    {
        "train_steps",
        "accelerator",
        "tpu_name",
        "promised_devices",
        "tpu_connect_timeout_s",
        "training_process",
        "worker_join_timeout_s",
        "worker_heartbeat_timeout_s",
        "tpu_preflight",
        "profile_batches",
        "warm_start",
        "pretrained_weights",
        "accelerator_memory_gib",
        "eval_steps",
        "seed",
        "time_budget_minutes",  # plans a run's epochs before it starts; trials have theirs
    }
)
SearchValue = int | float | str | bool


class SearchDimension(_Section):
    """The values one TrainerConfig field takes in a search: a list, or a numeric range.

    A range of two integers searches integers (a batch size); `step` makes a range
    discrete; `sampling: log` spreads trials evenly over orders of magnitude.
    """

    values: tuple[SearchValue, ...] | None = Field(default=None, min_length=1)
    min: int | float | None = None
    max: int | float | None = None
    step: int | float | None = Field(default=None, gt=0)
    sampling: Literal["linear", "log"] = "linear"

    @model_validator(mode="after")
    def _values_or_range(self) -> SearchDimension:
        has_range = self.min is not None or self.max is not None
        if (self.values is not None) == has_range:
            raise ValueError("give either values: [...] or min and max")
        if has_range:
            if self.min is None or self.max is None or self.min >= self.max:
                raise ValueError(f"min must be below max, got min={self.min} max={self.max}")
            if self.sampling == "log" and self.min <= 0:
                raise ValueError("sampling: log needs min > 0")
        return self

    @property
    def extremes(self) -> tuple[SearchValue, ...]:
        """Values the field must accept: every listed value, or both ends of the range."""
        return self.values if self.values is not None else (self.min, self.max)


def _default_search_space() -> dict[str, SearchDimension]:
    return {
        "learning_rate": SearchDimension(min=1e-4, max=1e-2, sampling="log"),
        "per_replica_batch_size": SearchDimension(values=(32, 64, 128)),
        "dropout": SearchDimension(min=0.1, max=0.5),
    }


class TunerConfig(_Section):
    """A hyperparameter search (TFX's Tuner, KerasTuner) before the Trainer; off by default.

    Each trial trains through the Trainer's own code for `trial_steps` steps and is
    scored on the eval split; the Trainer then trains with the best trial's values.
    `search_space` keys are TrainerConfig field names, so any field of the training
    recipe can be searched. Hyperband's trial count follows from `trainer.epochs`
    (its largest budget), not `max_trials`.
    """

    enabled: bool = False
    algorithm: Literal["random", "hyperband", "bayesian"] = "random"
    objective: TunerObjective = "val_accuracy"
    max_trials: int = Field(default=8, ge=1, description="random and bayesian searches")
    trial_steps: int = Field(default=100, ge=1, description="training steps per trial")
    num_parallel_trials: int = Field(
        default=1, ge=1, description="Vertex AI: trials run at once, one custom-job worker each"
    )
    search_space: dict[str, SearchDimension] = Field(
        default_factory=_default_search_space, min_length=1
    )

    @field_validator("search_space")
    @classmethod
    def _tunable_fields(cls, space: dict[str, SearchDimension]) -> dict[str, SearchDimension]:
        """Every key is a tunable TrainerConfig field, and every value one it accepts."""
        tunable = sorted(set(TrainerConfig.model_fields) - UNTUNABLE_TRAINER_FIELDS)
        for name, dimension in space.items():
            if name not in tunable:
                raise ValueError(f"{name!r} is not a tunable trainer field; tunable: {tunable}")
            for value in dimension.extremes:
                try:
                    TrainerConfig.model_validate({name: value})
                except ValidationError as error:
                    reason = error.errors()[0]["msg"]
                    raise ValueError(
                        f"{name}: {value!r} is not a valid trainer.{name}: {reason}"
                    ) from None
        return space
