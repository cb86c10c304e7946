"""The `drift:` section's descriptions name the measure and the signals each threshold
really judges, read from the schema the comparison builds (components/drift/compare.py)."""

from __future__ import annotations

import numpy as np
import pytest

from tpu_pipeline.common.config import DriftConfig

# Words a description uses for each signal the comparison may judge.
SIGNAL_WORDS = {
    "brightness": "brightness",
    "contrast": "contrast",
    "sharpness": "sharpness",
    "predicted_class": "predicted class",
    "image_size": "size",
    "image_format": "format",
    "unsure": "unsure",
}


def _word(signal: str) -> str:
    """How descriptions call `signal`: a colour channel's `mean` or `spread` by its kind."""
    if signal.startswith("channel_"):
        return signal.rsplit("_", 1)[1]
    return SIGNAL_WORDS[signal]


THRESHOLDS = ("max_js_divergence", "max_class_mix_change", "max_unsure_share_change")


@pytest.fixture(scope="module")
def judged_by():
    """Each signal a photo model's reference holds -> (the `drift:` field whose threshold
    judges it, the measure), as `compare._drift_schema` sets them up."""
    import pandas as pd
    import tensorflow_data_validation as tfdv

    from tpu_pipeline.components.drift.compare import _drift_schema
    from tpu_pipeline.components.drift.signals import pixel_signals, prediction_signals, with_unsure

    rng = np.random.default_rng(0)
    count = 40
    signals = {
        **pixel_signals(rng.uniform(0, 255, (count, 4, 4, 3))),
        **with_unsure(prediction_signals(rng.dirichlet(np.ones(3), count), ["a", "b", "c"]), 0.5),
        "image_size": np.array(["4x4"] * count, dtype=object),
        "image_format": np.array(["jpeg"] * count, dtype=object),
    }
    statistics = tfdv.generate_statistics_from_dataframe(pd.DataFrame(signals), n_jobs=1)
    # Distinct thresholds tell which field's value each comparator got.
    drift = DriftConfig(
        max_js_divergence=0.21, max_class_mix_change=0.22, max_unsure_share_change=0.23
    )
    field_of = {getattr(drift, name): name for name in THRESHOLDS}
    found = {}
    for feature in _drift_schema(statistics, drift).feature:
        comparator = feature.drift_comparator
        if comparator.HasField("jensen_shannon_divergence"):
            found[feature.name] = (
                field_of[comparator.jensen_shannon_divergence.threshold],
                "Jensen-Shannon",
            )
        elif comparator.HasField("infinity_norm"):
            found[feature.name] = (field_of[comparator.infinity_norm.threshold], "L-infinity")
        else:
            found[feature.name] = (None, None)
    return found


def _description(field: str) -> str:
    return DriftConfig.model_fields[field].description


def test_each_threshold_names_the_measure_and_the_signals_it_judges(judged_by):
    for signal, (field, measure) in judged_by.items():
        if field is None:
            continue
        assert measure in _description(field), (signal, field)
        assert _word(signal) in _description(field), (signal, field)


def test_no_threshold_names_a_signal_another_one_judges(judged_by):
    for field in THRESHOLDS:
        for signal, (judge, _) in judged_by.items():
            if judge not in (None, field):
                assert _word(signal) not in _description(field), (field, signal)


def test_the_confidence_is_compared_only_as_the_share_of_unsure_answers(judged_by):
    assert judged_by["confidence"] == (None, None)
    assert judged_by["unsure"][0] == "max_unsure_share_change"
    for field in THRESHOLDS:
        assert "confidence" not in _description(field)
