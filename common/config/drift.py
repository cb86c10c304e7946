"""The `drift:` section: when `predict` says the images it was given have moved away from
the ones the model was checked on, and by how much is too much."""

from __future__ import annotations

from pydantic import Field

from common.config.base import _Section


class DriftConfig(_Section):
    """Thresholds of the label-free shift check every `predict` job runs (docs/drift.md).

    The job's images are compared with the model's reference (the eval images the
    Trainer measured it on) through TFDV's drift comparators: Jensen-Shannon
    divergence for each numeric signal (pixel statistics, stored image size, the
    model's confidence), L-infinity distance for each categorical one (predicted class,
    stored format, the share of unsure predictions). The defaults stay quiet on a fresh
    sample of the training data's kind and fire on images of another kind; the
    figures behind them are in docs/drift.md.
    """

    max_js_divergence: float = Field(
        default=0.2,
        gt=0,
        le=1,
        description="largest Jensen-Shannon divergence of a numeric signal (pixel mean, "
        "spread, brightness, contrast, sharpness, stored image size) from the reference",
    )
    max_class_mix_change: float = Field(
        default=0.2,
        gt=0,
        le=1,
        description="largest change of any predicted class's share (L-infinity distance), "
        "also of a stored image format's share",
    )
    low_confidence: float = Field(
        default=0.5,
        gt=0,
        lt=1,
        description="a prediction whose top probability is under this counts as unsure",
    )
    max_unsure_share_change: float = Field(
        default=0.15,
        gt=0,
        le=1,
        description="largest change of the share of unsure predictions",
    )
    min_records: int = Field(
        default=30,
        ge=1,
        description="fewer records than this are not compared: their histograms say too "
        "little to call a shift",
    )
