"""Accuracy per slice of the eval split: counted as the predictions imply, flagged by the
margin, and a per-slice bound stops the blessing naming the slice, unless the slice is too
small to judge.

TFMA evaluates made-up predictions of photos with the Evaluator's own eval config:
PNGs are answered at random, JPEGs mostly right, and a handful of large photos are all
wrong, too few to be flagged or judged.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from ml_metadata.proto import metadata_store_pb2

from tests.pipeline.tfma_results import DATASET, NAMES, PHOTOS, write_evaluation
from tpu_pipeline.common.config import ConfigError, EvaluatorConfig, load_config
from tpu_pipeline.components.evaluation.results import (
    blessing_reason,
    read_verdict,
    slice_metrics,
    thresholds,
)
from tpu_pipeline.pipeline.report import plots
from tpu_pipeline.pipeline.report.html import slice_rows
from tpu_pipeline.pipeline.results.parts.evaluation import EVALUATOR_RULES_PROPERTY
from tpu_pipeline.pipeline.results.run_record import NodeRecord
from tpu_pipeline.pipeline.results.run_summary import RunSummary
from tpu_pipeline.pipeline.results.summary_reading import summarize_run
from tpu_pipeline.pipeline.wiring.node_ids import NodeIds

EXAMPLES = 200
LARGE = 6  # photos over 512 px: all wrong, fewer than the default slice_min_examples


def _photos() -> tuple[np.ndarray, np.ndarray, dict[str, list]]:
    rng = np.random.default_rng(1)
    labels = np.arange(EXAMPLES) % len(NAMES)
    formats = np.where(np.arange(EXAMPLES) % 4 == 0, "png", "jpeg")
    scores = rng.random((EXAMPLES, len(NAMES)))
    scores[np.arange(EXAMPLES), labels] += 2.0  # right...
    scores[formats == "png"] = rng.random(((formats == "png").sum(), len(NAMES)))  # ...but PNGs
    longer = np.where(np.arange(EXAMPLES) % 2 == 0, 60, 200)
    longer[-LARGE:] = 900
    scores[-LARGE:] = 0.0
    scores[np.arange(EXAMPLES - LARGE, EXAMPLES), (labels[-LARGE:] + 1) % len(NAMES)] = 1.0
    features = {
        "image_format": list(formats),
        "image_height": [[int(side)] for side in longer],
        "image_width": [[int(side) // 2] for side in longer],  # the longer side is the height
    }
    return labels, scores / scores.sum(axis=1, keepdims=True), features


BOUNDED = EvaluatorConfig(
    accuracy_lower_bound=0.5, slice_accuracy_lower_bounds={"image_format": 0.6}
)


@pytest.fixture(scope="module")
def evaluation_uri(tmp_path_factory) -> str:
    labels, probabilities, features = _photos()
    output = str(tmp_path_factory.mktemp("tfma"))
    return write_evaluation(output, labels, probabilities, BOUNDED, PHOTOS, features)


def _expected() -> dict[tuple[str, str], tuple[int, float]]:
    """(kind, value) -> (examples, accuracy), worked out from the predictions themselves."""
    labels, probabilities, features = _photos()
    right = probabilities.argmax(axis=1) == labels
    longer = np.array([height[0] for height in features["image_height"]])
    buckets = np.select(
        [longer <= 64, longer <= 128, longer <= 256, longer <= 512],
        ["up to 64 px", "65-128 px", "129-256 px", "257-512 px"],
        "over 512 px",
    )
    groups = {("class", NAMES[c]): labels == c for c in range(len(NAMES))}
    groups |= {
        ("image_format", f): np.array(features["image_format"]) == f for f in ("jpeg", "png")
    }
    groups |= {("image_size", b): buckets == b for b in set(buckets)}
    return {key: (int(mask.sum()), float(right[mask].mean())) for key, mask in groups.items()}


def test_each_slice_holds_its_examples_and_their_accuracy(evaluation_uri):
    slices = slice_metrics(evaluation_uri, NAMES, EvaluatorConfig())
    found = {(s.kind, s.value): (s.examples, s.accuracy) for s in slices}
    expected = _expected()
    assert found.keys() == expected.keys()
    for key, (examples, accuracy) in expected.items():
        assert found[key][0] == examples, key
        assert found[key][1] == pytest.approx(accuracy, abs=1e-6), key
    # Classes in label order, then formats, then size buckets from small to large.
    assert [s.value for s in slices] == [
        *NAMES,
        "jpeg",
        "png",
        "up to 64 px",
        "129-256 px",
        "over 512 px",
    ]


def test_a_slice_is_flagged_below_the_margin_unless_it_is_too_small(evaluation_uri):
    flagged = {
        (s.kind, s.value)
        for s in slice_metrics(evaluation_uri, NAMES, EvaluatorConfig())
        if s.flagged
    }
    expected = _expected()
    labels, probabilities, _ = _photos()
    overall = float((probabilities.argmax(axis=1) == labels).mean())
    assert expected[("image_size", "over 512 px")] == (LARGE, 0.0)  # far below, but 6 examples
    assert flagged == {
        key
        for key, (examples, accuracy) in expected.items()
        if examples >= 20 and overall - accuracy > 0.1
    }
    assert ("image_format", "png") in flagged
    # A wider margin flags none; a smaller minimum flags the large photos too.
    wide = EvaluatorConfig(slice_margin=0.9)
    assert not any(s.flagged for s in slice_metrics(evaluation_uri, NAMES, wide))
    small = EvaluatorConfig(slice_min_examples=LARGE)
    assert ("image_size", "over 512 px") in {
        (s.kind, s.value) for s in slice_metrics(evaluation_uri, NAMES, small) if s.flagged
    }


def test_a_per_slice_bound_refuses_the_blessing_and_names_the_slice(evaluation_uri):
    png_accuracy = _expected()[("image_format", "png")][1]
    assert png_accuracy < 0.6 < _expected()[("image_format", "jpeg")][1]  # the premise
    assert blessing_reason(evaluation_uri, False, False, NAMES) == (
        f"accuracy on image_format=png {png_accuracy:.4f} is below the lower bound 0.6000"
    )
    assert [(t.metric, t.rule, t.slices) for t in thresholds(evaluation_uri)] == [
        ("accuracy", "at least 0.5000", None),
        (
            "accuracy",
            "at least 0.6000 on every image format holding at least 20 eval examples",
            "image_format",
        ),
    ]


def test_a_bound_on_the_size_buckets_holds_every_bucket_large_enough_to_it(tmp_path):
    """The buckets come from a SQL slice; the 6 large photos, all wrong, refuse the model
    once the bound judges slices of 6."""
    labels, probabilities, features = _photos()
    evaluator = EvaluatorConfig(
        accuracy_lower_bound=0.5,
        slice_min_examples=LARGE,
        slice_accuracy_lower_bounds={"image_size": 0.5},
    )
    output = write_evaluation(str(tmp_path), labels, probabilities, evaluator, PHOTOS, features)
    assert blessing_reason(output, False, False, NAMES) == (
        "accuracy on image_size=over 512 px 0.0000 is below the lower bound 0.5000"
    )
    assert not read_verdict(output).blessed


def test_a_one_photo_slice_below_its_bound_is_reported_not_judged(tmp_path):
    """Issue 46: one wrong photo, alone in its size bucket, refused the model, though the
    same slice was too small to be flagged. A bound judges only slices of at least
    slice_min_examples; a smaller one is reported as not judged, in the reason, the
    summary JSON and the report's slice table."""
    labels = np.arange(40) % len(NAMES)
    probabilities = np.eye(len(NAMES))[labels]
    probabilities[0] = np.eye(len(NAMES))[1]  # the one large photo: wrong
    longer = [900] + [60] * 39
    features = {
        "image_format": ["jpeg"] * 40,
        "image_height": [[side] for side in longer],
        "image_width": [[side] for side in longer],
    }
    evaluator = EvaluatorConfig(
        accuracy_lower_bound=0.5, slice_accuracy_lower_bounds={"image_size": 0.8}
    )
    output = write_evaluation(str(tmp_path), labels, probabilities, evaluator, PHOTOS, features)

    verdict = read_verdict(output)
    assert verdict.blessed
    reason = blessing_reason(output, True, False, NAMES)
    assert reason == (
        "passed every threshold (first model: no baseline yet); not judged by the slice "
        "bounds, with fewer than 20 eval examples (evaluator.slice_min_examples): "
        "image_size=over 512 px (1 example)"
    )
    summary = RunSummary.without_results("p", [], None, None)
    summary.class_names = list(NAMES)
    summary.add_evaluation(output, verdict.blessed, evaluator)
    written = {s["value"]: s for s in json.loads(summary.to_json())["slices"]}
    assert (written["over 512 px"]["bound"], written["over 512 px"]["bound_outcome"]) == (
        0.8,
        "not judged",
    )
    assert (written["up to 64 px"]["bound"], written["up to 64 px"]["bound_outcome"]) == (
        0.8,
        "met",
    )
    assert written["circle"]["bound"] is None  # no bound on classes
    rows = {row[1]: row for row in slice_rows(summary.slices, summary.slice_min_examples)}
    assert rows["over 512 px"][5] == "0.8000: not judged: too few examples"
    assert rows["up to 64 px"][5] == "0.8000: met"


def test_the_overall_bound_does_not_hold_each_class_to_it(tmp_path):
    """A class below the overall bound does not refuse a model whose whole split clears it:
    only `slice_accuracy_lower_bounds` bounds slices."""
    labels = np.arange(80) % len(NAMES)
    probabilities = np.eye(len(NAMES))[labels]
    weak = np.flatnonzero(labels == 0)[:10]  # half the circles taken for squares
    probabilities[weak] = np.eye(len(NAMES))[1]
    evaluator = EvaluatorConfig(accuracy_lower_bound=0.8)
    output = write_evaluation(str(tmp_path / "alone"), labels, probabilities, evaluator)
    circle = next(s for s in slice_metrics(output, NAMES, evaluator) if s.value == "circle")
    assert circle.accuracy == 0.5 and circle.flagged  # below 0.8, and flagged in the report
    assert blessing_reason(output, True, False, NAMES).startswith("passed every threshold")

    bounded = EvaluatorConfig(accuracy_lower_bound=0.8, slice_accuracy_lower_bounds={"class": 0.8})
    output = write_evaluation(str(tmp_path / "bounded"), labels, probabilities, bounded)
    assert blessing_reason(output, False, False, NAMES) == (
        "accuracy on class=circle 0.5000 is below the lower bound 0.8000"
    )


def test_summary_report_and_message_show_the_flagged_slices(evaluation_uri):
    summary = RunSummary.without_results("p", [], None, None)
    summary.class_names = list(NAMES)
    summary.add_evaluation(evaluation_uri, False, EvaluatorConfig())
    png = next(s for s in summary.slices if s.value == "png")

    written = json.loads(summary.to_json())
    assert written["slice_margin"] == 0.1 and written["slice_min_examples"] == 20
    assert {"kind": "image_format", "value": "png", "examples": png.examples}.items() <= (
        next(s for s in written["slices"] if s["value"] == "png").items()
    )
    line = next(line for line in summary.to_text().splitlines() if "slices" in line)
    assert line.startswith(
        "weak slices (more than 0.10 below the overall accuracy with at least 20 examples): "
    )
    assert f"image_format=png {png.accuracy:.4f} ({png.examples} examples)" in line
    assert "over 512 px" not in line  # too small to flag

    rows = {row[1]: row for row in slice_rows(summary.slices, summary.slice_min_examples)}
    assert rows["png"][4] == "yes" and rows["jpeg"][4] == ""
    assert rows["over 512 px"][4] == "too few examples to flag"
    chart = plots.slice_accuracies(summary.slices, summary.metrics["accuracy"], 0.1).axes[0]
    assert "image_format=png" in [t.get_text() for t in chart.get_yticklabels()]


def test_a_run_with_no_weak_slice_says_so_in_one_line(tmp_path):
    labels = np.arange(40) % len(NAMES)
    output = write_evaluation(str(tmp_path), labels, np.eye(len(NAMES))[labels])
    summary = RunSummary.without_results("p", [], None, None)
    summary.class_names = list(NAMES)
    summary.add_evaluation(output, True)
    assert summary.describe_slices() == (
        "slices: none more than 0.10 below the overall accuracy with at least 20 examples "
        "(4 slices of class)"
    )


def test_photo_slice_bounds_are_refused_for_pixel_data():
    with pytest.raises(ConfigError, match="image_format slices are the stored photos"):
        load_config(None, {"evaluator.slice_accuracy_lower_bounds": {"image_format": 0.8}})
    bounded = load_config(None, {"evaluator.slice_accuracy_lower_bounds": {"class": 0.8}})
    assert bounded.evaluator.slice_accuracy_lower_bounds == {"class": 0.8}


class _EvaluatedRun:
    """A RunRecord of a run whose Evaluator wrote `evaluation_uri` and noted `rules`."""

    def __init__(self, evaluation_uri: str, rules: EvaluatorConfig):
        blessing = metadata_store_pb2.Artifact(uri=evaluation_uri + "/blessing")
        blessing.custom_properties["blessed"].int_value = 0
        self._evaluator = NodeRecord(
            "executed",
            {
                "evaluation": [metadata_store_pb2.Artifact(uri=evaluation_uri)],
                "blessing": [blessing],
            },
        )
        self._noted = {(NodeIds.EVALUATOR, EVALUATOR_RULES_PROPERTY): rules.model_dump_json()}

    def node(self, node_id: str) -> NodeRecord:
        return self._evaluator if node_id == NodeIds.EVALUATOR else NodeRecord("skipped", {})

    def noted(self, node_id: str, name: str) -> str | None:
        return self._noted.get((node_id, name))


def test_a_summary_rebuilt_after_the_run_flags_by_the_margin_the_run_noted(evaluation_uri):
    wide = EvaluatorConfig(slice_margin=0.9)
    record = _EvaluatedRun(evaluation_uri, wide)

    rebuilt = summarize_run(record, [], None, None, "p", NAMES)  # as a report without a config

    assert rebuilt.slice_margin == 0.9 and not any(s.flagged for s in rebuilt.slices)
    given = summarize_run(record, [], None, None, "p", NAMES, EvaluatorConfig())
    assert given.slice_margin == 0.1 and any(s.flagged for s in given.slices)


def test_a_run_of_several_spans_is_sliced_by_span_and_folder_and_bounded_per_span(tmp_path):
    """Spans 2 and 10 (number order, not text order): span 10 answered at random; two
    scanner folders across both."""
    spans_dataset = DATASET.model_copy(
        update={
            "file_pattern": "span-{SPAN}/*/*.tfrecord",
            "span_window": 2,
            "source_folder_slices": True,
        }
    )
    rng = np.random.default_rng(2)
    labels = np.arange(120) % len(NAMES)
    span = np.where(np.arange(120) < 80, 2, 10)
    probabilities = np.eye(len(NAMES))[labels] * 0.9 + 0.025
    probabilities[span == 10] = rng.dirichlet(np.ones(len(NAMES)), (span == 10).sum())
    right = probabilities.argmax(axis=1) == labels
    evaluator = EvaluatorConfig(accuracy_lower_bound=0.1, slice_accuracy_lower_bounds={"span": 0.8})
    folder = np.where(np.arange(120) % 3 == 0, "scanner-b", "scanner-a")
    features = {"span": list(span), "source_folder": list(folder)}
    output = write_evaluation(
        str(tmp_path), labels, probabilities, evaluator, spans_dataset, features
    )
    by_span = [
        (s.value, s.examples, s.accuracy)
        for s in slice_metrics(output, NAMES, evaluator)
        if s.kind == "span"
    ]
    assert by_span == [
        ("2", 80, pytest.approx(float(right[span == 2].mean()))),
        ("10", 40, pytest.approx(float(right[span == 10].mean()))),
    ]
    by_folder = [
        (s.value, s.examples, s.accuracy)
        for s in slice_metrics(output, NAMES, evaluator)
        if s.kind == "source_folder"
    ]
    assert by_folder == [
        (name, int((folder == name).sum()), pytest.approx(float(right[folder == name].mean())))
        for name in ("scanner-a", "scanner-b")
    ]
    assert right[span == 10].mean() < 0.8 <= right[span == 2].mean()  # the premise
    assert blessing_reason(output, False, False, NAMES) == (
        f"accuracy on span=10 {right[span == 10].mean():.4f} is below the lower bound 0.8000"
    )
    assert (
        "accuracy",
        "at least 0.8000 on every span holding at least 20 eval examples",
        "span",
    ) in [(t.metric, t.rule, t.slices) for t in thresholds(output)]


def test_span_and_folder_slice_bounds_are_refused_where_nothing_records_them():
    with pytest.raises(ConfigError, match="span slices are the spans of a run.*reads no spans"):
        load_config(None, {"evaluator.slice_accuracy_lower_bounds": {"span": 0.8}})
    one_span = {"dataset.file_pattern": "span-{SPAN}/*.tfrecord"}
    with pytest.raises(ConfigError, match="reads one span a run"):
        load_config(None, {**one_span, "evaluator.slice_accuracy_lower_bounds": {"span": 0.8}})
    window = {**one_span, "dataset.span_window": 2}
    bounded = load_config(None, {**window, "evaluator.slice_accuracy_lower_bounds": {"span": 0.8}})
    assert bounded.evaluator.slice_accuracy_lower_bounds == {"span": 0.8}
    with pytest.raises(ConfigError, match="source_folder slices need"):
        load_config(None, {"evaluator.slice_accuracy_lower_bounds": {"source_folder": 0.8}})
    folders = {"dataset.source_folder_slices": True}
    bounded = load_config(
        None, {**folders, "evaluator.slice_accuracy_lower_bounds": {"source_folder": 0.8}}
    )
    assert bounded.evaluator.slice_accuracy_lower_bounds == {"source_folder": 0.8}
