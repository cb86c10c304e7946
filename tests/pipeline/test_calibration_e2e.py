"""The Evaluator's calibration of the top probability, checked against the served model."""

from __future__ import annotations

import numpy as np
import pytest

from tests.pipeline.e2e_helpers import eval_answers

pytestmark = pytest.mark.slow


def test_the_calibration_error_is_the_served_models_own_bucket_by_bucket(digits_run):
    config, summary = digits_run
    calibration = summary.calibration
    assert calibration is not None
    assert calibration.examples == summary.metrics["example_count"]
    probabilities, labels = eval_answers(summary.pushed_model, config)
    top, right = probabilities.max(axis=1), probabilities.argmax(axis=1) == labels
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
