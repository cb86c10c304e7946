"""The `serving:` section: what the ServingPackager makes of the trained model (the TFLite
variants published beside each blessed SavedModel, temperature scaling, the drift
reference), and the time budget of the serving check before a push."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from tpu_pipeline.common.config.base import _Section

TFLiteVariant = Literal["float32", "float16", "dynamic_int8", "int8", "pruned"]


class ServingConfig(_Section):
    """What is published beside each blessed SavedModel, and the accuracy it must keep.

    The ServingPackager (`components/packager.py`) makes it after the Trainer, in a step
    of its own. Each TFLite variant is measured against the SavedModel on the same eval
    images, the first `measured_examples` of the shuffled eval split, and
    published with it only when its accuracy is at most `max_accuracy_drop`
    lower (docs/serving/tflite.md).
    """

    package: bool = Field(
        default=True,
        description="run the ServingPackager after the Trainer: TF Serving's warmup "
        "requests, temperature scaling, the drift reference predict compares with, and the "
        "TFLite variants with their measurements; false leaves the step out, the Evaluator "
        "and the Pusher take the Trainer's SavedModel as it is, and the Pusher publishes a "
        "copy with warmup requests from the eval split",
    )
    tflite_variants: tuple[TFLiteVariant, ...] = Field(
        default=("float32", "float16", "dynamic_int8", "int8"),
        description="float32, float16 (weights), dynamic_int8 (weights), int8 (full integer), "
        "pruned (float32 in TFLite's sparse format; needs trainer.pruning)",
    )
    max_accuracy_drop: float = Field(
        default=0.01, ge=0, le=1, description="largest eval accuracy drop against the SavedModel"
    )
    representative_examples: int = Field(
        default=200, ge=1, description="training examples that calibrate the int8 variant"
    )
    measured_examples: int = Field(
        default=2000,
        ge=1,
        description="eval examples the SavedModel and each variant are classified on (the "
        "first of the shuffled eval split); streamed, so it costs time, not memory",
    )
    latency_examples: int = Field(
        default=200, ge=1, description="eval images each model classifies one at a time, timed"
    )
    temperature_scaling: bool = Field(
        default=False,
        description="fit one temperature on the eval split's answers (the first "
        "measured_examples) and serve softmax(log p / T) when it lowers the expected "
        "calibration error; the class each image gets is unchanged",
    )
    check_timeout_seconds: float = Field(
        default=120.0,
        gt=0,
        description="the Pusher's serving check: starting a model server on the candidate "
        "and every signature's answer must fit in this many seconds",
    )

    @model_validator(mode="after")
    def _temperature_needs_the_packager(self) -> ServingConfig:
        if self.temperature_scaling and not self.package:
            raise ValueError(
                "temperature_scaling is fitted by the ServingPackager, which package: false "
                "leaves out; set package to true or temperature_scaling to false"
            )
        return self

    @model_validator(mode="after")
    def _distinct_variants(self) -> ServingConfig:
        if len(set(self.tflite_variants)) != len(self.tflite_variants):
            raise ValueError(f"tflite_variants lists a variant twice: {self.tflite_variants}")
        return self
