"""The Evaluator's calibration of the top probability and its accuracy per class slice,
checked against the served model's own answers."""

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


def test_each_class_slice_is_the_served_models_accuracy_on_that_class(digits_run):
    config, summary = digits_run
    probabilities, labels = eval_answers(summary.pushed_model, config)
    right = probabilities.argmax(axis=1) == labels
    assert [(s.kind, s.value) for s in summary.slices] == [
        ("class", name) for name in config.dataset.class_names
    ]  # digits are pixel values: no format or size slices
    for class_id, found in enumerate(summary.slices):
        assert found.examples == (labels == class_id).sum()
        assert found.accuracy == pytest.approx(right[labels == class_id].mean(), abs=1e-6)
        weak = found.examples >= 20 and right.mean() - found.accuracy > 0.1
        assert found.flagged == weak
    assert (summary.slice_margin, summary.slice_min_examples) == (0.1, 20)
    assert summary.describe_slices() in summary.to_text().splitlines()
