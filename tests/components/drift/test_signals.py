"""The per-image signals: what each measures, on images whose answer is known."""

from __future__ import annotations

import numpy as np
import pytest

from tpu_pipeline.components.drift.signals import pixel_signals, prediction_signals, with_unsure


def test_a_flat_gray_image_has_its_value_as_brightness_and_no_contrast_or_edges():
    signals = pixel_signals(np.full((1, 4, 5, 1), 7.0))
    assert signals["brightness"] == pytest.approx([7.0])
    assert signals["contrast"] == pytest.approx([0.0])
    assert signals["sharpness"] == pytest.approx([0.0])
    assert set(signals) == {"brightness", "contrast", "sharpness"}  # one channel: no per-channel


def test_stripes_are_sharper_than_a_blur_of_them_with_the_same_brightness():
    stripes = np.tile([0.0, 10.0], (1, 6, 3))[..., np.newaxis]  # [1, 6, 6, 1]
    blurred = np.full_like(stripes, 5.0)
    sharp, flat = pixel_signals(stripes), pixel_signals(blurred)
    assert sharp["brightness"] == pytest.approx(flat["brightness"])
    assert sharp["contrast"] == pytest.approx([5.0])
    # Across, every neighbour differs by 10; down, none: the mean of the two is 5.
    assert sharp["sharpness"] == pytest.approx([5.0]) and flat["sharpness"] == pytest.approx([0])


def test_a_colour_cast_moves_its_channel_and_brightness_follows_the_luma_weights():
    red = np.zeros((2, 3, 3, 3))
    red[..., 0] = 100.0
    signals = pixel_signals(red)
    assert signals["channel_0_mean"] == pytest.approx([100, 100])
    assert signals["channel_1_mean"] == pytest.approx([0, 0])
    assert signals["brightness"] == pytest.approx([29.9, 29.9])  # BT.601: red weighs 0.299
    assert signals["channel_0_spread"] == pytest.approx([0, 0])


def test_a_one_pixel_image_has_no_neighbours_and_no_sharpness():
    assert pixel_signals(np.ones((3, 1, 1, 1)))["sharpness"] == pytest.approx([0, 0, 0])


def test_predictions_give_the_class_name_the_top_probability_and_unsure_below_the_threshold():
    probabilities = np.array([[0.1, 0.9], [0.6, 0.4], [0.45, 0.55]])
    signals = with_unsure(prediction_signals(probabilities, ("cat", "dog")), low_confidence=0.5)
    assert list(signals["predicted_class"]) == ["dog", "cat", "dog"]
    assert signals["confidence"] == pytest.approx([0.9, 0.6, 0.55])
    assert list(signals["unsure"]) == ["no", "no", "no"]
    assert list(with_unsure(signals, 0.58)["unsure"]) == ["no", "no", "yes"]
