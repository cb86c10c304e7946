"""The `evaluator:` section: the accuracy a model must reach to be blessed and pushed,
overall and on each slice of the eval split."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from common.config.base import _Section

# The slices the Evaluator measures: each class, for photos the stored format and the
# size bucket of the stored image's longer side, for a run that reads several spans each
# span, and with dataset.source_folder_slices each source folder
# (components/evaluation/eval_config.py).
SliceKind = Literal["class", "image_format", "image_size", "span", "source_folder"]
PHOTO_SLICE_KINDS: tuple[SliceKind, ...] = ("image_format", "image_size")
_Accuracy = Annotated[float, Field(ge=0, le=1)]


class EvaluatorConfig(_Section):
    """What a model must reach to be blessed and pushed, and which slices the report flags."""

    accuracy_lower_bound: float = Field(default=0.9, ge=0, le=1)
    max_accuracy_drop: float = Field(
        default=0.0, ge=0, le=1, description="allowed drop against the last blessed model"
    )
    slice_margin: float = Field(
        default=0.1,
        ge=0,
        le=1,
        description="a slice whose accuracy is below the overall accuracy by more than this "
        "is flagged in the summary and the report",
    )
    slice_min_examples: int = Field(
        default=20,
        ge=1,
        description="slices with fewer eval examples are shown but never flagged: their "
        "accuracy is too noisy to call a weakness",
    )
    slice_accuracy_lower_bounds: dict[SliceKind, _Accuracy] = Field(
        default_factory=dict,
        description="opt-in blessing bounds: every slice of the kind (every class, every "
        "format, every size bucket, span or folder) must reach the accuracy, or the model is "
        "not blessed",
    )
