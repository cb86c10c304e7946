"""The Evaluator's calibration of the top probability, checked against the served model."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tests.pipeline.e2e_helpers import split_files

pytestmark = pytest.mark.slow


def _top_probabilities_and_hits(saved_model_dir: str, config) -> tuple[np.ndarray, np.ndarray]:
    records = [
        record.numpy()
        for record in tf.data.TFRecordDataset(split_files(config, "eval"), compression_type="GZIP")
    ]
    label = config.dataset.label_feature
    labels = np.array(
        [
            tf.train.Example.FromString(r).features.feature[label].int64_list.value[0]
            for r in records
        ]
    )
    serve = tf.saved_model.load(saved_model_dir).signatures["serving_default"]
    probabilities = serve(examples=tf.constant(records))["probabilities"].numpy()
    return probabilities.max(axis=1), probabilities.argmax(axis=1) == labels


def test_the_calibration_error_is_the_served_models_own_bucket_by_bucket(digits_run):
    config, summary = digits_run
    calibration = summary.calibration
    assert calibration is not None
    assert calibration.examples == summary.metrics["example_count"]
    top, right = _top_probabilities_and_hits(summary.pushed_model, config)
    # The same ten buckets of the top probability, computed here from the model's answers.
    bucket = np.minimum((top * 10).astype(int), 10)  # 1.0 has a bucket of its own in TFMA
    expected = sum(
        abs(right[bucket == b].sum() - top[bucket == b].sum()) for b in np.unique(bucket)
    ) / len(top)
    assert calibration.expected_calibration_error == pytest.approx(expected, abs=1e-4)
    assert sum(b.examples for b in calibration.buckets) == len(top)
    assert all(0 <= b.low < b.high <= 1 or b.low == b.high == 1 for b in calibration.buckets)
    # Digits: nearly every answer is sure and right, so the top bucket holds most.
    assert max(calibration.buckets, key=lambda b: b.examples).low >= 0.9
    assert "calibration: expected calibration error" in summary.to_text()
