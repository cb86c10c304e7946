"""A new span's images against the served model's: two drift references, compared by TFDV.

Each model keeps the image signals of the data it was trained on
(`reference.py`). When a run trains on a new span, its model's reference holds the
new span's images, and the last blessed model's, the Evaluator's baseline, holds the
images the served model learned from: comparing the two says, label-free and before
anyone asks the new model, whether the new span's images moved. Only the image
signals are compared (brightness, contrast, sharpness, per-channel means and
spreads, stored size and format): the prediction signals come from two different
models and would measure the change of model as much as the change of data.

Both tables are small (at most `serving.measured_examples` rows each), so their
statistics are computed in this process with TFDV's in-memory path, both alike, and
judged with the `drift:` thresholds `predict` uses (`compare.py`). A run keeps the check
as `kept` makes it: the run summary reports it, and with `drift.block_push` the
SpanShiftGate (`components/span_shift_gate.py`) makes it before the Pusher.
"""

from __future__ import annotations

import os
from typing import Any

import pandas as pd
import tensorflow_data_validation as tfdv
from tfx.utils.path_constants import SERVING_MODEL_DIR

from tpu_pipeline.common.config import DriftConfig
from tpu_pipeline.components.drift.compare import DriftCheck, compare
from tpu_pipeline.components.drift.reference import (
    DamagedReference,
    Reference,
    read_drift_reference,
)

# The subject of the check's one-line headline.
SPAN_SHIFT = "span shift"


def _statistics(table: dict) -> object:
    return tfdv.generate_statistics_from_dataframe(pd.DataFrame(table), n_jobs=1)


def compare_training_images(new: Reference, served: Reference, drift: DriftConfig) -> DriftCheck:
    """The new model's training images against the served model's, signal by signal."""
    described = f"{len(next(iter(served.images.values()))):,} training images of the served model"
    return compare(_statistics(new.images), _statistics(served.images), drift, described)


def span_shift(new_model_dir: str, served_model_dir: str, drift: DriftConfig) -> DriftCheck:
    """The new span's images (the new model's reference) against the served model's; or
    a check that says why nothing was compared (a model kept no reference, or a damaged one).
    """
    try:
        new = read_drift_reference(new_model_dir)
        served = read_drift_reference(served_model_dir)
    except DamagedReference as error:
        return DriftCheck(0, "", note=str(error))
    if served is None:
        return DriftCheck(0, "", note=f"the served model ({served_model_dir}) keeps no reference")
    if new is None:
        return DriftCheck(0, "", note=f"the new model ({new_model_dir}) keeps no reference")
    return compare_training_images(new, served, drift)


def kept(check: DriftCheck) -> dict[str, Any]:
    """A check as a run keeps it (the summary's `span_shift`, the gate's verdict): its JSON
    and its headline."""
    return {**check.to_json(), "headline": check.headline(SPAN_SHIFT)}


def model_span_shift(new_model_uri: str, served_model_uri: str, drift: DriftConfig) -> dict:
    """`span_shift` of two Model artifacts (their URIs: the run's model and the Evaluator's
    baseline, the served one), as a run keeps it."""
    check = span_shift(
        os.path.join(new_model_uri, SERVING_MODEL_DIR),
        os.path.join(served_model_uri, SERVING_MODEL_DIR),
        drift,
    )
    return kept(check)
