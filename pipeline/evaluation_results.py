"""The one reader of the Evaluator's TFMA output, for the run summary and the report.

Overall metrics (candidate and baseline), the blessing decision in words, per-class
metrics, the confusion matrix, the calibration of the top probability and the
thresholds, all through TFMA's public loaders.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
import tensorflow_model_analysis as tfma

from pipeline.eval_config import ACCURACY_METRIC

PER_CLASS_METRICS = ("precision", "recall")
# Metric classes as the report names them (the summary calls accuracy `accuracy` too).
_SHOWN_NAMES = {"SparseCategoricalAccuracy": "accuracy"}


@dataclasses.dataclass
class Threshold:
    """One threshold of the eval config, in words (and its bound, to draw it)."""

    metric: str
    rule: str
    lower_bound: float | None = None


@dataclasses.dataclass
class ClassMetrics:
    """One class on the eval split (candidate model): TFMA's precision and recall, and the
    confusion matrix's counts they come from."""

    class_id: int
    class_name: str
    precision: float | None  # None: the model never predicted the class (0 of 0)
    recall: float | None  # None: the eval split has no example of the class
    examples: int  # eval examples of the class: its confusion-matrix row
    predicted: int  # eval examples predicted as the class: its column


@dataclasses.dataclass
class CalibrationBucket:
    """Eval examples whose top probability fell in [low, high): how sure, how often right."""

    low: float
    high: float
    examples: int
    confidence: float  # their mean top probability
    accuracy: float  # the share whose top class is the label


@dataclasses.dataclass
class Calibration:
    """The candidate's top-label calibration on the eval split.

    `expected_calibration_error` is the examples' mean gap between how sure the
    model was and how often it was right, bucket by bucket (Guo et al., 2017):
    sum over buckets of |right - sum of top probabilities| / examples. 0 is perfect;
    a model that says 0.999 and is right 90% of the time has about 0.1.
    """

    expected_calibration_error: float
    examples: int
    buckets: list[CalibrationBucket]


@dataclasses.dataclass
class EvaluationFacts:
    per_class: list[ClassMetrics]  # in class order
    confusion_matrix: np.ndarray | None  # [true class, predicted class] example counts
    thresholds: list[Threshold]


def _is_candidate(key) -> bool:
    # With a baseline TFMA names the models `candidate` and `baseline`; alone, "".
    return key.model_name != "baseline"


def _overall_slice(evaluation_uri: str):
    """(key, value) of every metric on the overall slice (the whole eval split)."""
    for metrics_for_slice in tfma.load_metrics(evaluation_uri):
        if not metrics_for_slice.slice_key.single_slice_keys:
            for entry in metrics_for_slice.metric_keys_and_values:
                if not entry.key.is_diff and entry.value.HasField("double_value"):
                    yield entry.key, entry.value.double_value.value


def overall_metrics(evaluation_uri: str) -> tuple[dict[str, float], dict[str, float] | None]:
    """Candidate and baseline metrics of the whole eval split, by metric name.

    Accuracy also appears as `accuracy`, whatever the metric class is called.
    """
    candidate: dict[str, float] = {}
    baseline: dict[str, float] = {}
    for key, value in _overall_slice(evaluation_uri):
        if not key.HasField("sub_key"):  # per-class values are the report's
            (candidate if _is_candidate(key) else baseline)[key.name] = value
    for metrics in (candidate, baseline):
        if ACCURACY_METRIC in metrics:
            metrics["accuracy"] = metrics[ACCURACY_METRIC]
    return candidate, baseline or None


def per_class_metrics(evaluation_uri: str) -> dict[str, dict[int, float]]:
    """TFMA's per-class precision and recall of the candidate over the whole eval split.

    A metric TFMA could not define (precision of a class never predicted) is NaN.
    """
    per_class: dict[str, dict[int, float]] = {}
    for key, value in _overall_slice(evaluation_uri):
        if (
            _is_candidate(key)
            and key.sub_key.HasField("class_id")
            and key.name in PER_CLASS_METRICS
        ):
            per_class.setdefault(key.name, {})[key.sub_key.class_id.value] = value
    return per_class


def _describe_failure(failure) -> str:
    """Says in words which threshold a metric missed, and by how much."""
    name = "accuracy" if failure.metric_key.name == ACCURACY_METRIC else failure.metric_key.name
    value = failure.metric_value.double_value.value
    threshold = failure.metric_threshold
    if failure.metric_key.is_diff:
        allowed = threshold.change_threshold.absolute.value
        return (
            f"{name} changed by {value:+.4f} against the last blessed model "
            f"(allowed: {allowed:+.4f} or better)"
        )
    bound = threshold.value_threshold.lower_bound.value
    return f"{name} {value:.4f} is below the lower bound {bound:.4f}"


def blessing_reason(evaluation_uri: str, blessed: bool, has_baseline: bool) -> str:
    """Why the model was blessed or not: each missed threshold, or that all passed."""
    result = tfma.load_validation_result(evaluation_uri)
    failures = [
        _describe_failure(failure)
        for per_slice in result.metric_validations_per_slice
        for failure in per_slice.failures
    ]
    if failures:
        return "; ".join(failures)
    if blessed:
        return "passed every threshold" + (
            " against the last blessed model" if has_baseline else " (first model: no baseline yet)"
        )
    return "validation failed"


def confusion_matrix(evaluation_uri: str, num_classes: int) -> np.ndarray | None:
    """Counts of eval examples by true (rows) and predicted (columns) class."""
    for plots_for_slice in tfma.load_plots(evaluation_uri):
        if plots_for_slice.slice_key.single_slice_keys:
            continue
        for entry in plots_for_slice.plot_keys_and_values:
            if not _is_candidate(entry.key):
                continue
            matrices = entry.value.multi_class_confusion_matrix_at_thresholds.matrices
            if not matrices:
                continue
            counts = np.zeros((num_classes, num_classes))
            for cell in matrices[0].entries:
                if 0 <= cell.actual_class_id < num_classes and 0 <= cell.predicted_class_id:
                    counts[cell.actual_class_id, cell.predicted_class_id] += (
                        cell.num_weighted_examples
                    )
            return counts
    return None


def calibration(evaluation_uri: str) -> Calibration | None:
    """The candidate's calibration plot (`eval_config.calibration_metrics_spec`), bucketed
    and summed into its expected calibration error; None if the evaluation has none."""
    for plots_for_slice in tfma.load_plots(evaluation_uri):
        if plots_for_slice.slice_key.single_slice_keys:
            continue
        for entry in plots_for_slice.plot_keys_and_values:
            if not _is_candidate(entry.key) or entry.key.sub_key.k.value != 1:
                continue
            histogram = entry.value.calibration_histogram_buckets.buckets
            if not histogram:
                continue
            buckets, gaps = [], 0.0
            for bucket in histogram:
                count = bucket.num_weighted_examples.value
                if count <= 0:
                    continue
                right = bucket.total_weighted_label.value
                said = bucket.total_weighted_refined_prediction.value
                gaps += abs(right - said)
                low = max(bucket.lower_threshold_inclusive, 0.0)
                high = min(bucket.upper_threshold_exclusive, 1.0)
                buckets.append(
                    CalibrationBucket(low, high, round(count), said / count, right / count)
                )
            examples = sum(bucket.examples for bucket in buckets)
            if examples:
                return Calibration(gaps / examples, examples, buckets)
    return None


def _describe_threshold(class_name: str, threshold) -> list[Threshold]:
    shown = _SHOWN_NAMES.get(class_name, class_name)
    rules = []
    if threshold.HasField("value_threshold"):
        bounds = threshold.value_threshold
        if bounds.HasField("lower_bound"):
            bound = bounds.lower_bound.value
            rules.append(Threshold(shown, f"at least {bound:.4f}", lower_bound=bound))
        if bounds.HasField("upper_bound"):
            rules.append(Threshold(shown, f"at most {bounds.upper_bound.value:.4f}"))
    if threshold.HasField("change_threshold"):
        allowed = -threshold.change_threshold.absolute.value
        rules.append(
            Threshold(
                shown,
                f"may drop by at most {max(allowed, 0.0):.4f} against the last blessed model",
            )
        )
    return rules


def thresholds(evaluation_uri: str) -> list[Threshold]:
    """The thresholds the Evaluator applied (TFX drops change thresholds on a first run)."""
    eval_config = tfma.load_eval_result(evaluation_uri).config
    if eval_config is None:
        return []
    rules = []
    for spec in eval_config.metrics_specs:
        for metric in spec.metrics:
            if metric.HasField("threshold"):
                rules += _describe_threshold(metric.class_name, metric.threshold)
    return rules


def _defined(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else value


def class_metrics(
    evaluation_uri: str, class_names: Sequence[str], matrix: np.ndarray | None = None
) -> list[ClassMetrics]:
    """Precision, recall and counts of every class, named; empty without a confusion matrix.

    Args:
      evaluation_uri: the Evaluator's output.
      class_names: every class's name, in label order.
      matrix: the confusion matrix, if already read.
    """
    if matrix is None:
        matrix = confusion_matrix(evaluation_uri, len(class_names))
    if matrix is None:
        return []
    metrics = per_class_metrics(evaluation_uri)
    return [
        ClassMetrics(
            class_id=class_id,
            class_name=name,
            precision=_defined(metrics.get("precision", {}).get(class_id)),
            recall=_defined(metrics.get("recall", {}).get(class_id)),
            examples=int(matrix[class_id].sum()),
            predicted=int(matrix[:, class_id].sum()),
        )
        for class_id, name in enumerate(class_names)
    ]


def read_evaluation(evaluation_uri: str, class_names: Sequence[str]) -> EvaluationFacts:
    """Everything the report's evaluation section needs beyond the run summary."""
    matrix = confusion_matrix(evaluation_uri, len(class_names))
    return EvaluationFacts(
        per_class=class_metrics(evaluation_uri, class_names, matrix),
        confusion_matrix=matrix,
        thresholds=thresholds(evaluation_uri),
    )
