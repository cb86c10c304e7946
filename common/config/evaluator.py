"""The `evaluator:` section: the accuracy a model must reach to be blessed and pushed,
overall and on each slice of the eval split."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from tpu_pipeline.common.config.base import _Section

# The slices the Evaluator measures: each class, for photos the stored format and the
# size bucket of the stored image's longer side, for a run that reads several spans each
# span, and with dataset.source_folder_slices each source folder
# (components/evaluation/eval_config.py).
SliceKind = Literal["class", "image_format", "image_size", "span", "source_folder"]
PHOTO_SLICE_KINDS: tuple[SliceKind, ...] = ("image_format", "image_size")
# How the candidate is compared with the last blessed model on the same eval examples
# (components/evaluation/baseline_test.py).
BaselineTest = Literal["mcnemar", "accuracy_drop"]
_Accuracy = Annotated[float, Field(ge=0, le=1)]


class EvaluatorConfig(_Section):
    """What a model must reach to be blessed and pushed, and which slices the report flags."""

    accuracy_lower_bound: float = Field(default=0.9, ge=0, le=1)
    max_accuracy_drop: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="the eval accuracy the candidate may lose against the last blessed "
        "model: with baseline_test mcnemar it is refused only when it is significantly worse "
        "than the baseline by more than this",
    )
    baseline_test: BaselineTest = Field(
        default="mcnemar",
        description="how the candidate is compared with the last blessed model on the same "
        "eval examples: mcnemar (McNemar's exact test on the examples exactly one of the two "
        "gets right) refuses it only when it is worse beyond max_accuracy_drop at "
        "baseline_confidence, so a retrain one image worse by chance is blessed; "
        "accuracy_drop refuses any drop beyond max_accuracy_drop, however few images it "
        "rests on",
    )
    baseline_confidence: float = Field(
        default=0.95,
        ge=0.5,
        lt=1,
        description="with baseline_test mcnemar: how sure the test must be that the candidate "
        "is worse before refusing it (one-sided); 0.95 refuses a retrain as good as its "
        "baseline at most 1 time in 20 (docs/evaluation-gates.md)",
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
        description="slices with fewer eval examples are shown but never flagged, nor held "
        "to slice_accuracy_lower_bounds: their accuracy is too noisy to call a weakness",
    )
    slice_accuracy_lower_bounds: dict[SliceKind, _Accuracy] = Field(
        default_factory=dict,
        description="opt-in blessing bounds: every slice of the kind (every class, every "
        "format, every size bucket, span or folder) holding at least slice_min_examples eval "
        "examples must reach the accuracy, or the model is not blessed; smaller slices are "
        "reported as not judged",
    )
