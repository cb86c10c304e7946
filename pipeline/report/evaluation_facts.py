"""How the model did in TFMA: per-class metrics, the confusion matrix and the thresholds.

The overall metrics and the blessing decision come from the run summary
(`pipeline.run_summary`); this module reads what only the report shows, from
the same Evaluator output.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.writers.eval_config_writer import load_eval_run

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
class EvaluationFacts:
    per_class: dict[str, dict[int, float]]  # metric -> class id -> value (candidate model)
    confusion_matrix: np.ndarray | None  # [true class, predicted class] example counts
    thresholds: list[Threshold]


def _is_candidate(key) -> bool:
    # With a baseline TFMA names the models `candidate` and `baseline`; alone, "".
    return key.model_name != "baseline"


def per_class_metrics(evaluation_uri: str) -> dict[str, dict[int, float]]:
    """Per-class precision and recall of the candidate over the whole eval split."""
    per_class: dict[str, dict[int, float]] = {}
    for metrics_for_slice in tfma.load_metrics(evaluation_uri):
        if metrics_for_slice.slice_key.single_slice_keys:
            continue
        for entry in metrics_for_slice.metric_keys_and_values:
            key = entry.key
            if key.is_diff or not (_is_candidate(key) and key.sub_key.HasField("class_id")):
                continue
            if key.name in PER_CLASS_METRICS and entry.value.HasField("double_value"):
                class_id = key.sub_key.class_id.value
                per_class.setdefault(key.name, {})[class_id] = entry.value.double_value.value
    return per_class


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
    eval_config = load_eval_run(evaluation_uri)[0]
    if eval_config is None:
        return []
    rules = []
    for spec in eval_config.metrics_specs:
        for metric in spec.metrics:
            if metric.HasField("threshold"):
                rules += _describe_threshold(metric.class_name, metric.threshold)
    return rules


def read_evaluation(evaluation_uri: str, num_classes: int) -> EvaluationFacts:
    """Everything the report's evaluation section needs beyond the run summary."""
    return EvaluationFacts(
        per_class=per_class_metrics(evaluation_uri),
        confusion_matrix=confusion_matrix(evaluation_uri, num_classes),
        thresholds=thresholds(evaluation_uri),
    )
