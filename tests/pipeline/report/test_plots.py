"""The report's charts draw what the numbers are: bars from zero, classes by name."""

from __future__ import annotations

from tests.pipeline.report.label_statistics import label_split
from tpu_pipeline.components.evaluation.results import ClassMetrics
from tpu_pipeline.pipeline.report.plots import feature_histograms, per_class_metrics


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
