"""The report's charts draw what the numbers are: bars from zero, classes by name, each image
in its own cell under its own title."""

from __future__ import annotations

import numpy as np
import pytest

from tests.pipeline.report.label_statistics import label_split
from tpu_pipeline.components.evaluation.results import ClassMetrics
from tpu_pipeline.components.explain.choice import Chosen
from tpu_pipeline.components.explain.store import Attributions
from tpu_pipeline.pipeline.report.plots import (
    attribution_maps,
    feature_histograms,
    per_class_metrics,
    png_bytes,
    sample_predictions,
)
from tpu_pipeline.pipeline.report.serving_facts import Samples


def _bar_heights(axes) -> list[float]:
    return [patch.get_height() for patch in axes.patches]


def test_a_low_recall_shows_as_a_bar_rising_from_zero():
    per_class = [
        ClassMetrics(0, "cat", precision=0.62, recall=0.349, examples=43, predicted=24),
        ClassMetrics(1, "dog", precision=0.91, recall=0.97, examples=60, predicted=64),
    ]

    (axes,) = per_class_metrics(per_class).axes

    bottom, top = axes.get_ylim()
    assert (bottom, top) == (0, 1.0)
    assert 0.349 in [round(height, 3) for height in _bar_heights(axes)]


def test_the_label_histogram_names_the_classes_under_its_bars():
    splits = [label_split("train", [120, 80])]

    (axes,) = feature_histograms(splits, "label", ["cat", "dog"]).axes

    assert [tick.get_text() for tick in axes.get_xticklabels()] == ["cat", "dog"]
    assert list(axes.get_xticks()) == [0, 1]
    assert axes.get_title() == "label classes"


def _cells(axes) -> list[tuple[float, float, float, float]]:
    """Each image's (left, right, bottom, top) in the grid's units (inches from the top-left)."""
    return [image.get_extent() for image in axes.images]


def test_the_sample_grid_shows_each_image_in_its_own_cell_titled_mistakes_in_red():
    images = np.random.default_rng(0).integers(0, 255, (3, 8, 16, 1)).astype(np.float32)
    samples = Samples(
        images=images,
        true_labels=np.array([0, 1, 1]),
        predicted=np.array([0, 0, 1]),
        confidence=np.array([0.9, 0.6, 0.75]),
        examined=3,
        mistakes=1,
    )

    figure = sample_predictions(samples, ["cat", "dog"], columns=2)

    (axes,) = figure.axes
    assert [(text.get_text(), text.get_color()) for text in axes.texts] == [
        ("cat (cat)\n90%", "black"),
        ("cat (dog)\n60%", "tab:red"),
        ("dog (dog)\n75%", "black"),
    ]
    cells = _cells(axes)
    assert len(cells) == 3
    for left, right, bottom, top in cells:
        assert right - left == pytest.approx(2 * (bottom - top))  # 16 wide, 8 high: kept
    (first_left, first_right, _, first_top), (second_left, *_), (third_left, _, _, third_top) = (
        cells
    )
    assert second_left > first_right  # side by side in the first row
    assert third_left == pytest.approx(first_left) and third_top > first_top  # the next row
    width, height = axes.get_xlim()[1], axes.get_ylim()[0]
    assert all(
        0 <= left and right <= width and 0 <= top and bottom <= height
        for left, right, bottom, top in cells
    )
    assert png_bytes(figure).startswith(b"\x89PNG")


def test_each_attribution_map_is_laid_over_its_image_beside_the_image_alone():
    attributions = Attributions(
        chosen=[
            Chosen(0, label=1, predicted=0, probability=0.875),
            Chosen(1, None, 1, 0.5, "a/b.jpg:3"),
        ],
        images=np.zeros((2, 6, 6, 3), np.uint8),
        maps=np.linspace(0, 1, 72).reshape(2, 6, 6),
        method="integrated_gradients",
        settings={},
    )

    figure = attribution_maps(attributions, ["cat", "dog"], pairs_per_row=1)

    (axes,) = figure.axes
    assert [(text.get_text(), text.get_color()) for text in axes.texts] == [
        ("dog -> cat\n87.5%", "tab:red"),
        ("? -> dog\n50.0%\nb.jpg:3", "black"),
    ]
    image, base, overlay, *second = _cells(axes)
    assert base == overlay and image[1] < base[0]  # the map over a copy, to the image's right
    assert [layer.get_alpha() for layer in axes.images] == [None, None, 0.6] * 2
    assert len(second) == 3 and second[0][3] > image[3]  # the second answer on the next row
