"""The pushed version's model card, from a real run: every figure is the run's own."""

from __future__ import annotations

import json
import pathlib

import pytest

from tests.pipeline.e2e_helpers import executions_of, input_artifact_ids, mlmd_store
from tpu_pipeline.components.model_card.write import CARD_HTML, CARD_JSON
from tpu_pipeline.components.serving.measurements import read_measurements

pytestmark = pytest.mark.slow


def _card(summary) -> dict:
    return json.loads((pathlib.Path(summary.pushed_model) / CARD_JSON).read_text())


def test_the_pushed_version_holds_its_card_and_the_summary_says_where(digits_run):
    config, summary = digits_run
    pushed = pathlib.Path(summary.pushed_model)
    assert summary.model_card == str(pushed / CARD_JSON)
    assert (pushed / CARD_HTML).is_file()
    assert f"model card: {pushed / CARD_JSON} (and model_card.html beside it)" in summary.to_text()
    assert json.loads(summary.to_json())["model_card"] == summary.model_card
    details = _card(summary)["model_details"]
    assert details["version"]["name"] == pushed.name
    assert details["name"] == f"{config.dataset.name} {config.trainer.model}"


def test_the_cards_metrics_are_the_evaluators_and_the_variants_measured(digits_run):
    config, summary = digits_run
    metrics = _card(summary)["quantitative_analysis"]["performance_metrics"]
    by_key = {(m["type"], m.get("slice")): m["value"] for m in metrics}
    assert by_key[("accuracy", None)] == pytest.approx(summary.metrics["accuracy"])
    assert by_key[("eval examples", None)] == summary.metrics["example_count"]
    for s in summary.slices:
        assert by_key[("accuracy", f"{s.kind}: {s.value}")] == pytest.approx(s.accuracy)
    assert by_key[("expected calibration error", None)] == pytest.approx(
        summary.calibration.expected_calibration_error
    )
    for measured in read_measurements(summary.pushed_model)["models"]:
        key = (f"accuracy of the {measured['name']} variant", None)
        assert by_key[key] == pytest.approx(measured["accuracy"])


def test_the_card_names_the_ml_metadata_artifacts_it_was_made_from(digits_run):
    config, summary = digits_run
    store = mlmd_store(config)
    pusher = executions_of(store, config, "Pusher")[-1]
    documentation = _card(summary)["model_details"]["documentation"]
    for kind, key in [
        ("Model", "model"),
        ("ModelEvaluation", "evaluation"),
        ("ModelBlessing", "model_blessing"),
        ("ExampleStatistics", "statistics"),
    ]:
        (artifact_id,) = input_artifact_ids(store, pusher.id, key)
        (artifact,) = store.get_artifacts_by_id([artifact_id])
        assert f"{kind} {artifact_id} at {artifact.uri}" in documentation
    data = _card(summary)["model_parameters"]["data"]
    examples = {
        d["name"]: int(d["description"].split(" examples")[0].replace(",", "")) for d in data
    }
    assert examples[f"{config.dataset.name} eval split"] == summary.metrics["example_count"]
    assert sum(examples.values()) == 1797  # every digit of load_digits, train and eval
