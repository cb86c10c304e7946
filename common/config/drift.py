"""The `drift:` section: when `predict` says the images it was given have moved away from
the ones the model was checked on, and by how much is too much."""

from __future__ import annotations

from pydantic import Field

from tpu_pipeline.common.config.base import _Section


class DriftConfig(_Section):
    """Thresholds of the label-free shift check every `predict` job runs, and of a new
    span's images against the served model's (docs/drift.md).

    The images' signals are compared with the model's reference (the signals of its
    training images, and its answers on its eval images) through TFDV's drift
    comparators: Jensen-Shannon divergence for each numeric signal (brightness,
    contrast, sharpness, and for colour images each channel's mean and spread),
    L-infinity distance for each categorical one (the predicted class, for photos the
    stored size and format, and the share of unsure answers). The confidence itself is
    not compared, only the share of answers under `low_confidence`; a new span is
    compared on its image signals alone. The defaults stay quiet on a fresh sample of
    the training data's kind and fire on images of another kind; the figures behind
    them are in docs/drift.md.

    `block_push` turns the span check from a report into a gate before the Pusher, for
    whoever must not serve a model trained on images unlike the served model's before a
    person has looked (`run --fail-on-drift` sets it too).
    """

    max_js_divergence: float = Field(
        default=0.2,
        gt=0,
        le=1,
        description="largest Jensen-Shannon divergence of a numeric signal (brightness, "
        "contrast, sharpness, each colour channel's mean and spread) from the reference",
    )
    max_class_mix_change: float = Field(
        default=0.2,
        gt=0,
        le=1,
        description="largest change of any value's share of a categorical signal "
        "(L-infinity distance): the predicted class, and for photos the stored image size "
        "(width x height) and format",
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
        description="largest change of the share of unsure predictions (L-infinity distance)",
    )
    min_records: int = Field(
        default=30,
        ge=1,
        description="fewer records than this are not compared: their histograms say too "
        "little to call a shift",
    )
    # A report cannot stop a push made before it is read: the gate runs before the Pusher.
    block_push: bool = Field(
        default=False,
        description="with data in spans: a new span whose images moved from the served "
        "model's (the same signals and thresholds as the span shift report) is not pushed, "
        "and `run` exits 3; false: the shift is only reported",
    )
