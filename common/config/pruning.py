"""The `trainer.pruning` subsection: magnitude pruning during training (off unless given)."""

from __future__ import annotations

from pydantic import Field, model_validator

from tpu_pipeline.common.config.base import _Section


class PruningConfig(_Section):
    """How much of each Conv/Dense kernel is zeroed while training, and when.

    The TensorFlow Model Optimization toolkit's low-magnitude pruning with a
    polynomial schedule: sparsity rises from `initial_sparsity` to
    `target_sparsity` between `begin_fraction` and `end_fraction` of the
    training steps, the masks updated every `frequency` steps, and the rest of
    training recovers accuracy with the masks fixed. Fractions, not steps: the
    same setting suits 1,000 images and 100,000.
    """

    target_sparsity: float = Field(
        gt=0, lt=1, description="fraction of each pruned kernel's weights that end at zero"
    )
    initial_sparsity: float = Field(
        default=0.0, ge=0, lt=1, description="sparsity applied when pruning begins"
    )
    begin_fraction: float = Field(
        default=0.0, ge=0, lt=1, description="fraction of the training steps before pruning starts"
    )
    end_fraction: float = Field(
        default=0.7,
        gt=0,
        le=1,
        description="fraction of the training steps by which target_sparsity is reached",
    )
    frequency: int | None = Field(
        default=None,
        ge=1,
        description="training steps between mask updates; null: ten updates over the pruning "
        "window (every step when the window is shorter than the frequency)",
    )

    @model_validator(mode="after")
    def _ordered(self) -> PruningConfig:
        if self.begin_fraction >= self.end_fraction:
            raise ValueError(
                f"begin_fraction ({self.begin_fraction}) must be below end_fraction "
                f"({self.end_fraction})"
            )
        if self.initial_sparsity >= self.target_sparsity:
            raise ValueError(
                f"initial_sparsity ({self.initial_sparsity}) must be below target_sparsity "
                f"({self.target_sparsity})"
            )
        return self
