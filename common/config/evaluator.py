"""The `evaluator:` section: the accuracy a model must reach to be blessed and pushed."""

from __future__ import annotations

from pydantic import Field

from common.config.base import _Section


class EvaluatorConfig(_Section):
    """What a model must reach to be blessed and pushed."""

    accuracy_lower_bound: float = Field(default=0.9, ge=0, le=1)
    max_accuracy_drop: float = Field(
        default=0.0, ge=0, le=1, description="allowed drop against the last blessed model"
    )
