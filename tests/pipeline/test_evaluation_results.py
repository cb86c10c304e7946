"""Per-class precision and recall agree with TFMA's confusion matrix, and name the classes.

TFMA evaluates made-up predictions with the Evaluator's own eval config: a model
that never predicts one class, and predicts another one too often.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.pipeline.tfma_results import NAMES, write_evaluation
from tpu_pipeline.components.evaluation.results import read_evaluation
from tpu_pipeline.pipeline.report import plots
from tpu_pipeline.pipeline.report.html import per_class_rows
from tpu_pipeline.pipeline.results.run_summary import RunSummary

NEVER_PREDICTED = 3  # heart


def _predictions() -> tuple[np.ndarray, np.ndarray]:
    """Labels and softmax-like probabilities: hearts become circles or stars, never hearts."""
    rng = np.random.default_rng(0)
    labels = np.arange(120) % len(NAMES)
    scores = rng.random((len(labels), len(NAMES)))
    scores[np.arange(len(labels)), labels] += 0.6  # mostly right...
    scores[:, NEVER_PREDICTED] *= 0.1  # ...but hearts are never the top class
    scores[labels == NEVER_PREDICTED, 2] += 0.3  # and mostly taken for stars
    return labels, scores / scores.sum(axis=1, keepdims=True)


@pytest.fixture(scope="module")
def evaluation_uri(tmp_path_factory) -> str:
    """TFMA's output for `_predictions()` under the pipeline's eval config."""
    return write_evaluation(str(tmp_path_factory.mktemp("tfma")), *_predictions())


@pytest.fixture(scope="module")
def facts(evaluation_uri):
    return read_evaluation(evaluation_uri, NAMES)


def test_a_class_the_model_never_predicts_has_recall_0_and_no_precision(facts):
    heart = facts.per_class[NEVER_PREDICTED]
    assert facts.confusion_matrix[:, NEVER_PREDICTED].sum() == 0  # the premise
    assert heart.class_name == "heart"
    assert heart.predicted == 0 and heart.examples == 30
    assert heart.recall == 0.0
    assert heart.precision is None  # 0 of 0, not the class's share


def test_per_class_metrics_are_what_the_confusion_matrix_implies(facts):
    matrix = facts.confusion_matrix
    labels, probabilities = _predictions()
    assert matrix.sum() == len(labels)
    assert matrix.trace() == (probabilities.argmax(axis=1) == labels).sum()
    for metrics in facts.per_class:
        c = metrics.class_id
        assert metrics.class_name == NAMES[c]
        assert metrics.examples == matrix[c].sum() and metrics.predicted == matrix[:, c].sum()
        assert metrics.recall == pytest.approx(matrix[c, c] / matrix[c].sum())
        if metrics.predicted:
            assert metrics.precision == pytest.approx(matrix[c, c] / matrix[:, c].sum())


def test_summary_names_the_classes_and_the_one_never_predicted(facts):
    summary = RunSummary.without_results("p", [], None, None)
    summary.class_names, summary.per_class_metrics = list(NAMES), facts.per_class

    written = json.loads(summary.to_json())

    assert written["class_names"] == list(NAMES)
    assert [c["class_name"] for c in written["per_class_metrics"]] == list(NAMES)
    assert written["per_class_metrics"][NEVER_PREDICTED]["precision"] is None
    assert written["per_class_metrics"][NEVER_PREDICTED]["recall"] == 0.0
    assert "never predicted: heart (recall 0 on the eval split)" in summary.to_text().splitlines()


def test_report_shows_class_names_and_an_undefined_precision_as_such(facts):
    rows = per_class_rows(facts.per_class)
    assert [row[0] for row in rows] == list(NAMES)
    assert rows[NEVER_PREDICTED][1:] == ["undefined (never predicted)", "0.0000", "30", "0"]

    chart = plots.per_class_metrics(facts.per_class).axes[0]
    assert [t.get_text() for t in chart.get_xticklabels()] == list(NAMES)
    assert "never\npredicted" in [t.get_text() for t in chart.texts]
    matrix = plots.confusion_matrix(facts.confusion_matrix, list(NAMES)).axes[0]
    assert [t.get_text() for t in matrix.get_xticklabels()] == list(NAMES)
    assert [t.get_text() for t in matrix.get_yticklabels()] == list(NAMES)
