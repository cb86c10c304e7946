"""The card's facts read from real TFMA output and a model folder, and the Pusher writing them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.pipeline.tfma_results import DATASET, write_evaluation
from tpu_pipeline.common.config import EvaluatorConfig
from tpu_pipeline.common.tfx_api import standard_artifacts
from tpu_pipeline.components.model_card import card, facts

pytestmark = pytest.mark.slow  # TFMA runs a Beam job (~15 s)
RULE = EvaluatorConfig(accuracy_lower_bound=0.5)  # ~0.6 accurate: blessed, a class flagged


def _answers(rng, count: int = 200):
    """Labels, and probabilities right 80% of the time, never for class 'heart'."""
    labels = rng.integers(0, 4, count)
    predicted = np.where((rng.random(count) < 0.8) & (labels != 3), labels, (labels + 1) % 4)
    probabilities = np.full((count, 4), 0.1)
    probabilities[np.arange(count), predicted] = 0.7
    return labels, probabilities, predicted


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    folder = tmp_path_factory.mktemp("evaluation")
    labels, probabilities, predicted = _answers(np.random.default_rng(5))
    write_evaluation(str(folder / "evaluation"), labels, probabilities, RULE)
    model_dir = folder / "model" / "Format-Serving"
    (model_dir / "assets.extra").mkdir(parents=True)
    (model_dir / "assets.extra" / "training_info.json").write_text(
        json.dumps({"model": "cnn_bn", "epochs": 3, "strategy": "CPU (default strategy)"})
    )
    return folder, labels, predicted


def _artifact(kind, uri: str, **properties):
    artifact = kind()
    artifact.uri = uri
    for name, value in properties.items():
        artifact.set_int_custom_property(name, value)
    return artifact


def test_every_figure_is_tfmas_and_the_blessing_says_why(evaluated):
    folder, labels, predicted = evaluated
    evaluation = _artifact(standard_artifacts.ModelEvaluation, str(folder / "evaluation"))
    blessing = _artifact(standard_artifacts.ModelBlessing, str(folder / "blessing"), blessed=1)
    found = facts.gather(
        model=_artifact(standard_artifacts.Model, str(folder / "model")),
        model_dir=str(folder / "model" / "Format-Serving"),
        evaluation=evaluation,
        blessing=facts.evaluator_blessing(blessing, evaluation.uri, DATASET),
        blessing_artifact=blessing,
        statistics=None,
        dataset=DATASET,
        slice_rule=RULE,
        version="1796322718",
        version_dir="/srv/serving/1796322718",
        serving_check=None,
    )
    made = card.model_card(found)
    by_key = {
        (m["type"], m.get("slice")): m["value"]
        for m in made["quantitative_analysis"]["performance_metrics"]
    }

    assert by_key[("accuracy", None)] == pytest.approx(np.mean(predicted == labels))
    assert by_key[("eval examples", None)] == len(labels)
    assert by_key[("accuracy", "class: heart")] == 0.0
    assert by_key[("recall", "class: circle")] == pytest.approx(
        np.mean(predicted[labels == 0] == 0)
    )
    assert ("expected calibration error", None) in by_key
    assert found.date == "2026-12-03"  # the version number is the push time, UTC
    assert made["model_details"]["version"]["diff"].startswith("The first blessed model")
    assert (
        "by the Evaluator (TFMA): passed every threshold (first model"
        in (made["model_details"]["documentation"])
    )
    limitations = " ".join(card.limitations(found))
    assert "Accuracy on class heart is 0.0000" in limitations  # flagged: 0.1 below at least
    assert made["model_parameters"]["data"] == []  # no statistics given: no data claimed
