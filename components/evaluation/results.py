"""The one reader of the Evaluator's TFMA output, for the run summary and the report.

Overall metrics (candidate and baseline), the blessing decision in words, per-class
metrics, the confusion matrix, the calibration of the top probability, the metrics of
each slice, the examples only the candidate or only the baseline gets right, and the
rules, all through TFMA's public loaders, and the Evaluator's verdict written beside them
(`verdict.py`).
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Sequence

import numpy as np
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.writers import eval_config_writer

from tpu_pipeline.common import fileio
from tpu_pipeline.common.config import EvaluatorConfig, SliceKind
from tpu_pipeline.components.evaluation import paired_metric
from tpu_pipeline.components.evaluation.baseline_test import MCNEMAR
from tpu_pipeline.components.evaluation.eval_config import (
    ACCURACY_METRIC,
    SIZE_BUCKETS,
    slice_kinds_by_key,
)
from tpu_pipeline.components.evaluation.verdict import VERDICT_FILE, PairedCounts, Verdict

PER_CLASS_METRICS = ("precision", "recall")
# Metric classes as the report names them (the summary calls accuracy `accuracy` too).
_SHOWN_NAMES = {"SparseCategoricalAccuracy": "accuracy"}


@dataclasses.dataclass
class Threshold:
    """One threshold of the eval config, in words (and its bound, to draw it).

    `slices` is None for the whole eval split, else the kind of slice every one of
    which must meet it ("class", "image_format", "image_size", "span", "source_folder").
    """

    metric: str
    rule: str
    lower_bound: float | None = None
    slices: str | None = None


@dataclasses.dataclass
class SliceMetrics:
    """The candidate on one slice of the eval split: which, how many examples, how right.

    `flagged`: its accuracy is below the overall accuracy by more than the margin
    (`evaluator.slice_margin`), and it holds at least `evaluator.slice_min_examples`.
    `bound` and `bound_outcome`: where `evaluator.slice_accuracy_lower_bounds` names its
    kind, the bound and what the Evaluator's verdict made of the slice ("met", "below", or
    "not judged" for a slice under `evaluator.slice_min_examples`); else None.
    """

    kind: SliceKind
    value: str  # the class name, the format, or the size bucket
    examples: int
    accuracy: float
    flagged: bool = False
    bound: float | None = None
    bound_outcome: str | None = None


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


def paired_counts(evaluation_uri: str) -> PairedCounts | None:
    """The examples of the whole eval split only the candidate or only the baseline got
    right (`paired_metric.py`); None without a baseline."""
    counts = {}
    for metrics_for_slice in tfma.load_metrics(evaluation_uri):
        if metrics_for_slice.slice_key.single_slice_keys:
            continue
        for entry in metrics_for_slice.metric_keys_and_values:
            if entry.key.is_diff and entry.key.name in paired_metric.NAMES:
                counts[entry.key.name] = round(entry.value.double_value.value)
    if set(counts) != set(paired_metric.NAMES):
        return None
    return PairedCounts(
        candidate_right_only=counts[paired_metric.CANDIDATE_RIGHT_ONLY],
        baseline_right_only=counts[paired_metric.BASELINE_RIGHT_ONLY],
        examples=counts[paired_metric.PAIRED_EXAMPLES],
    )


def read_verdict(evaluation_uri: str) -> Verdict | None:
    """The Evaluator's verdict (`verdict.py`); None for an evaluation made before it wrote one."""
    path = f"{evaluation_uri.rstrip('/')}/{VERDICT_FILE}"
    if not fileio.exists(path):
        return None
    with fileio.open(path) as handle:
        return Verdict.from_json(handle.read())


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


def _slice_kind(column: str, label_key: str) -> str | None:
    return slice_kinds_by_key(label_key).get(column)


def _slice_value(single_key, kind: str | None, class_names: Sequence[str]) -> str:
    """A slice's value as people read it: a class's name, a format, a size bucket."""
    if single_key.HasField("int64_value"):
        value = single_key.int64_value
        return (
            class_names[value] if kind == "class" and 0 <= value < len(class_names) else str(value)
        )
    if single_key.HasField("bytes_value"):
        return single_key.bytes_value.decode("utf-8", "replace")
    return f"{single_key.float_value:g}"


def _slice_name(slice_key, label_key: str, class_names: Sequence[str]) -> str:
    """`class=cat`, `image_size=65-128 px`; empty for the whole eval split."""
    names = []
    for single_key in slice_key.single_slice_keys:
        kind = _slice_kind(single_key.column, label_key)
        names.append(f"{kind or single_key.column}={_slice_value(single_key, kind, class_names)}")
    return ", ".join(names)


def _describe_failure(failure, where: str) -> str:
    """Says in words which threshold a metric missed, on which slice, and by how much."""
    name = "accuracy" if failure.metric_key.name == ACCURACY_METRIC else failure.metric_key.name
    on = f" on {where}" if where else ""
    value = failure.metric_value.double_value.value
    threshold = failure.metric_threshold
    if failure.metric_key.is_diff:
        allowed = threshold.change_threshold.absolute.value
        return (
            f"{name}{on} changed by {value:+.4f} against the last blessed model "
            f"(allowed: {allowed:+.4f} or better)"
        )
    bound = threshold.value_threshold.lower_bound.value
    return f"{name}{on} {value:.4f} is below the lower bound {bound:.4f}"


def _describe_missing(spec) -> str:
    keys = list(spec.feature_keys) or ["a SQL slice"]
    return f"no eval example fell in a slice of {', '.join(keys)}, which a threshold names"


def blessing_reason(
    evaluation_uri: str, blessed: bool, has_baseline: bool, class_names: Sequence[str] = ()
) -> str:
    """Why the model was blessed or not: each missed rule (naming its slice), each slice
    kind a bound names and no example fell in, or that all passed; how it compared with the
    last blessed model, and which slices were too small to judge.

    `blessed`, `has_baseline` and `class_names` word an evaluation made before the
    Evaluator wrote its verdict (TFMA's validation result); the verdict says it all.
    """
    verdict = read_verdict(evaluation_uri)
    if verdict is not None:
        return verdict.reason()
    result = tfma.load_validation_result(evaluation_uri)
    label_key = _label_key(_eval_config(evaluation_uri))
    failures = [
        _describe_failure(failure, _slice_name(per_slice.slice_key, label_key, class_names))
        for per_slice in result.metric_validations_per_slice
        for failure in per_slice.failures
    ] + [_describe_missing(spec) for spec in result.missing_slices]
    if failures:
        return "; ".join(failures)
    if blessed:
        return "passed every threshold" + (
            " against the last blessed model" if has_baseline else " (first model: no baseline yet)"
        )
    return "validation failed"


def _eval_config(evaluation_uri: str):
    """The EvalConfig the Evaluator ran with, or None (only the config file is read)."""
    return eval_config_writer.load_eval_run(evaluation_uri)[0]


def _label_key(eval_config) -> str:
    return eval_config.model_specs[0].label_key if eval_config and eval_config.model_specs else ""


def slice_metrics(
    evaluation_uri: str, class_names: Sequence[str], rule: EvaluatorConfig
) -> list[SliceMetrics]:
    """The candidate's example count and accuracy on every slice, flagged by `rule`'s
    margin and minimum size against the overall accuracy, with what the verdict's slice
    bounds made of it (once the Evaluator has judged); in kind order (class,
    image_format, image_size, span, source_folder), then class order, format name, bucket
    size, span number, folder name."""
    label_key = _label_key(_eval_config(evaluation_uri))
    overall = None
    slices = []
    for metrics_for_slice in tfma.load_metrics(evaluation_uri):
        values = {
            entry.key.name: entry.value.double_value.value
            for entry in metrics_for_slice.metric_keys_and_values
            if _is_candidate(entry.key)
            and not entry.key.is_diff
            and not entry.key.HasField("sub_key")
            and entry.value.HasField("double_value")
        }
        keys = metrics_for_slice.slice_key.single_slice_keys
        if not keys:
            overall = values.get(ACCURACY_METRIC)
            continue
        if len(keys) != 1 or ACCURACY_METRIC not in values:
            continue
        kind = _slice_kind(keys[0].column, label_key)
        if kind is None:
            continue
        value = _slice_value(keys[0], kind, class_names)
        slices.append(
            SliceMetrics(
                kind, value, round(values.get("example_count", 0)), values[ACCURACY_METRIC]
            )
        )
    verdict = read_verdict(evaluation_uri)
    judged = {(j.kind, j.value): j for j in verdict.slice_judgments} if verdict else {}
    for s in slices:
        s.flagged = (
            overall is not None
            and s.examples >= rule.slice_min_examples
            and overall - s.accuracy > rule.slice_margin
        )
        if (s.kind, s.value) in judged:
            s.bound = judged[s.kind, s.value].bound
            s.bound_outcome = judged[s.kind, s.value].outcome
    return sorted(slices, key=lambda s: _slice_order(s, class_names))


def _slice_order(s: SliceMetrics, class_names: Sequence[str]) -> tuple:
    kinds = typing.get_args(SliceKind)
    if s.kind == "class":
        within = class_names.index(s.value) if s.value in class_names else len(class_names)
    elif s.kind == "image_size":
        within = SIZE_BUCKETS.index(s.value) if s.value in SIZE_BUCKETS else len(SIZE_BUCKETS)
    elif s.kind == "span":
        within = int(s.value) if s.value.isdigit() else 0
    else:
        within = 0
    return (kinds.index(s.kind), within, s.value)


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


_SLICE_SCOPES = {
    "class": "on every class",
    "image_format": "on every image format",
    "image_size": "on every image size",
    "span": "on every span",
    "source_folder": "on every source folder",
}


def _describe_threshold(class_name: str, threshold, slices: str | None) -> list[Threshold]:
    shown = _SHOWN_NAMES.get(class_name, class_name)
    scope = f" {_SLICE_SCOPES.get(slices, f'on every {slices} slice')}" if slices else ""
    rules = []
    if threshold.HasField("value_threshold"):
        bounds = threshold.value_threshold
        if bounds.HasField("lower_bound"):
            bound = bounds.lower_bound.value
            rules.append(Threshold(shown, f"at least {bound:.4f}{scope}", bound, slices))
        if bounds.HasField("upper_bound"):
            rules.append(
                Threshold(shown, f"at most {bounds.upper_bound.value:.4f}{scope}", None, slices)
            )
    if threshold.HasField("change_threshold"):
        allowed = -threshold.change_threshold.absolute.value
        rules.append(
            Threshold(
                shown,
                f"may drop by at most {max(allowed, 0.0):.4f}{scope} against the last blessed "
                "model",
                None,
                slices,
            )
        )
    return rules


def _verdict_rules(verdict: Verdict) -> list[Threshold]:
    rules = verdict.rules
    bound = rules.accuracy_lower_bound
    described = [Threshold("accuracy", f"at least {bound:.4f}", bound)]
    comparison = verdict.baseline_comparison
    if comparison is not None and comparison.test == MCNEMAR:
        beyond = f" by more than {comparison.allowed_drop:.4f}" if comparison.allowed_drop else ""
        described.append(
            Threshold(
                "accuracy",
                f"not significantly worse than the last blessed model{beyond} on the same eval "
                f"examples (McNemar's exact test, {comparison.confidence:g} confidence)",
            )
        )
    elif comparison is not None:
        described.append(
            Threshold(
                "accuracy",
                f"may drop by at most {comparison.allowed_drop:.4f} against the last blessed model",
            )
        )
    for kind, bound in rules.slice_accuracy_lower_bounds.items():
        described.append(
            Threshold(
                "accuracy",
                f"at least {bound:.4f} {_SLICE_SCOPES[kind]} holding at least "
                f"{rules.slice_min_examples} eval examples",
                bound,
                kind,
            )
        )
    return described


def thresholds(evaluation_uri: str) -> list[Threshold]:
    """The rules the Evaluator applied (the baseline comparison only where it had a
    baseline): the whole eval split's first, then those every slice of a kind must meet."""
    verdict = read_verdict(evaluation_uri)
    if verdict is not None:
        return _verdict_rules(verdict)
    eval_config = _eval_config(evaluation_uri)
    if eval_config is None:
        return []
    label_key = _label_key(eval_config)
    rules = []
    for spec in eval_config.metrics_specs:
        for metric in spec.metrics:
            if metric.HasField("threshold"):
                rules += _describe_threshold(metric.class_name, metric.threshold, None)
            for per_slice in metric.per_slice_thresholds:
                for slicing_spec in per_slice.slicing_specs:
                    keys = list(slicing_spec.feature_keys)
                    slices = (_slice_kind(keys[0], label_key) or keys[0]) if keys else None
                    rules += _describe_threshold(metric.class_name, per_slice.threshold, slices)
    return sorted(rules, key=lambda rule: rule.slices is not None)


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
