"""A new span's images against the served model's: quiet for more digits, loud for another kind."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.datasets import load_digits

from tpu_pipeline.common.config import DriftConfig
from tpu_pipeline.components.drift.reference import REFERENCE_PATH, Reference
from tpu_pipeline.components.drift.signals import pixel_signals
from tpu_pipeline.components.drift.span_shift import compare_training_images, span_shift


def _reference(images: np.ndarray) -> Reference:
    signals = pixel_signals(images[..., None])
    return Reference(images=signals, answers={"confidence": np.ones(len(images))})


@pytest.fixture(scope="module")
def digits() -> np.ndarray:
    return load_digits().images.astype(np.float32)  # 0..16, as the built-in data stores them


def test_a_new_span_of_the_same_digits_is_steady(digits):
    check = compare_training_images(
        _reference(digits[1::2]), _reference(digits[::2]), DriftConfig()
    )

    assert check.measurements and not check.shifts
    assert check.records == len(digits[1::2])
    assert {m.signal for m in check.measurements} == {"brightness", "contrast", "sharpness"}
    assert check.headline("span shift").startswith("span shift: none in 3 signals of 898 records")


def test_a_span_of_inverted_digits_moves_brightness_and_says_how_far(digits):
    check = compare_training_images(
        _reference(16 - digits[1::2]), _reference(digits[::2]), DriftConfig()
    )

    assert "brightness" in {m.signal for m in check.shifts}
    line = check.headline("span shift")
    assert line.startswith("span shift: ") and "brightness" in line and " -> " in line
    assert "899 training images of the served model" in line


def test_a_model_without_a_reference_or_with_a_damaged_one_is_named(tmp_path):
    served, new = tmp_path / "served", tmp_path / "new"
    (new / "assets.extra").mkdir(parents=True)
    (new / REFERENCE_PATH).write_text(json.dumps({"train": {}, "eval": {}}))

    assert "the served model" in span_shift(str(new), str(served), DriftConfig()).note
    (served / "assets.extra").mkdir(parents=True)
    (served / REFERENCE_PATH).write_text("{not json")
    damaged = span_shift(str(new), str(served), DriftConfig())
    assert not damaged.measurements and "is damaged" in damaged.note
    assert damaged.headline("span shift").startswith("span shift: not checked: ")
