"""The `explain:` section: which eval images the Explainer explains, and with which method.

The Explainer (`components/explainer.py`, a step after the Trainer) explains the served
model's answers on the eval split (the most
confident mistakes first, then a few correct answers per class) with PAIR's
`saliency` methods; the report shows each image beside its map, and `predict
--explain N` draws the same for a batch job (docs/explain.md).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tpu_pipeline.common.config.base import _Section

ExplainMethod = Literal["integrated_gradients", "xrai", "grad_cam"]
ExplainBaseline = Literal["black", "white"]


class ExplainConfig(_Section):
    """What the attribution step explains and how (`components/explain/`).

    Its cost is bounded by the number of images explained (`mistakes` plus
    `correct_per_class` per class) times `steps` gradient evaluations per baseline;
    `examined_examples` answers are searched for them, a batch at a time.
    """

    mistakes: int = Field(
        default=8,
        ge=0,
        description="the most confident mistakes among the examined eval images, explained "
        "first (0 and correct_per_class 0: no attributions)",
    )
    correct_per_class: int = Field(
        default=1, ge=0, description="correct answers explained per class, the most confident"
    )
    examined_examples: int = Field(
        default=1000,
        ge=1,
        description="eval examples searched for mistakes (the first of the shuffled eval split)",
    )
    method: ExplainMethod | Literal["auto"] = Field(
        default="auto",
        description="integrated_gradients, xrai or grad_cam; auto: integrated gradients "
        "for pixel data (small images, one value per pixel: a per-pixel map reads well), "
        "XRAI for photos (its regions follow the objects instead of scattered pixels); "
        "grad_cam is one model call an image, as coarse as its layer's feature maps",
    )
    grad_cam_layer: str | None = Field(
        default=None,
        description="the layer whose feature maps Grad-CAM weighs; default: the model's "
        "last layer with a feature-map output (cnn_bn: block2_pool, mnist_cnn: pool2, "
        "resnet20: stage3_block3_relu, a pretrained backbone: its last feature maps)",
    )
    steps: int = Field(
        default=32, ge=2, le=1024, description="integration steps from each baseline"
    )
    baselines: tuple[ExplainBaseline, ...] | None = Field(
        default=None,
        min_length=1,
        description="the images integration starts from (black: all zeros, white: the "
        "largest pixel value); default: black for integrated gradients, black and white "
        "for XRAI (a black baseline alone cannot credit dark pixels)",
    )

    @property
    def enabled(self) -> bool:
        return self.mistakes > 0 or self.correct_per_class > 0

    def method_for(self, photos: bool) -> ExplainMethod:
        """The method `auto` stands for: for photos (`stores_encoded_images`) or pixel data."""
        if self.method != "auto":
            return self.method
        return "xrai" if photos else "integrated_gradients"

    def baselines_for(self, method: ExplainMethod) -> tuple[ExplainBaseline, ...]:
        """The baselines to integrate from with `method`."""
        if method == "grad_cam":  # it integrates nothing
            return ()
        if self.baselines is not None:
            return self.baselines
        return ("black",) if method == "integrated_gradients" else ("black", "white")
