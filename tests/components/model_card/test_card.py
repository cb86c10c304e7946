"""The model card: the Model Card Toolkit's schema, filled from the recorded facts, as a page."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tpu_pipeline.common.config import load_config
from tpu_pipeline.components.evaluation.results import Calibration, ClassMetrics, SliceMetrics
from tpu_pipeline.components.model_card import card
from tpu_pipeline.components.model_card.facts import Blessing, CardFacts, DataSplit, Source, Variant
from tpu_pipeline.components.model_card.write import (
    CARD_HTML,
    CARD_JSON,
    read_model_card,
    render_html,
    write_model_card,
)

# The fields of each object of the Model Card Toolkit's schema v0.0.2 the card fills.
SCHEMA_FIELDS = {
    "model_details": {
        "name",
        "overview",
        "documentation",
        "owners",
        "version",
        "licenses",
        "references",
        "citations",
    },
    "model_parameters": {"model_architecture", "data", "input_format", "output_format"},
    "quantitative_analysis": {"performance_metrics", "graphics"},
    "considerations": {"users", "use_cases", "limitations", "tradeoffs", "ethical_considerations"},
    "version": {"name", "date", "diff"},
    "dataset": {"name", "link", "sensitive", "graphics", "description"},
    "performance_metric": {"type", "value", "slice"},
}


def make_facts(**changes) -> CardFacts:
    config = load_config(None, {"output_dir": "/tmp/unused"})
    facts = CardFacts(
        dataset=config.dataset,
        slice_rule=config.evaluator,
        version="1796322718",
        date="2026-12-03",
        version_dir="/srv/serving/1796322718",
        training={"model": "cnn_bn", "epochs": 15, "strategy": "CPU (default strategy)"},
        data=[DataSplit("train", 1450, 0), DataSplit("eval", 347, 0)],
        metrics={"accuracy": 0.97, "example_count": 347.0},
        baseline_metrics=None,
        per_class=[
            ClassMetrics(0, "0", 1.0, 0.95, 40, 38),
            ClassMetrics(1, "1", 0.9, None, 12, 10),
        ],
        slices=[
            SliceMetrics("class", "0", 40, 0.95),
            SliceMetrics("class", "1", 30, 0.80, flagged=True),
        ],
        calibration=Calibration(0.08, 347, []),
        variants=[
            Variant("saved_model", ".", 0.97, 800_000, 1.0, True, ""),
            Variant("int8", "tflite/int8.tflite", 0.96, 110_000, 0.2, True, ""),
            Variant(
                "float16",
                "tflite/float16.tflite",
                0.90,
                200_000,
                0.2,
                False,
                "accuracy 0.9000 is 0.07 below the SavedModel's",
            ),
        ],
        blessing=Blessing(True, "the Evaluator (TFMA)", "passed every threshold", None),
        serving_check="passed (serving_default, images, pixels in 0.1 s)",
        sources=[Source("Model", 8, "/root/Trainer/model/8"), Source("ModelBlessing", 9, "/b/9")],
    )
    return dataclasses.replace(facts, **changes)


def test_the_card_holds_only_the_schemas_fields():
    made = card.model_card(make_facts())

    assert tuple(made) == card.TOP_LEVEL_FIELDS and made["schema_version"] == "0.0.2"
    for section in ("model_details", "model_parameters", "quantitative_analysis", "considerations"):
        assert set(made[section]) <= SCHEMA_FIELDS[section], section
    assert set(made["model_details"]["version"]) <= SCHEMA_FIELDS["version"]
    for dataset in made["model_parameters"]["data"]:
        assert set(dataset) <= SCHEMA_FIELDS["dataset"]
    for metric in made["quantitative_analysis"]["performance_metrics"]:
        assert set(metric) <= SCHEMA_FIELDS["performance_metric"]
        assert isinstance(metric["value"], int | float) and isinstance(metric["type"], str)
    json.dumps(made, allow_nan=False)  # plain JSON


def test_metrics_cover_overall_classes_slices_calibration_and_each_variant():
    metrics = card.model_card(make_facts())["quantitative_analysis"]["performance_metrics"]
    by_key = {(m["type"], m.get("slice")): m["value"] for m in metrics}

    assert by_key[("accuracy", None)] == 0.97
    assert by_key[("eval examples", None)] == 347 and isinstance(
        by_key[("eval examples", None)], int
    )
    assert by_key[("recall", "class: 0")] == 0.95
    assert ("recall", "class: 1") not in by_key  # no eval example of it: no recall
    assert by_key[("accuracy", "class: 1")] == 0.80
    assert by_key[("eval examples", "class: 1")] == 30
    assert by_key[("expected calibration error", None)] == 0.08
    assert by_key[("accuracy of the int8 variant", None)] == 0.96
    assert by_key[("accuracy of the float16 variant", None)] == 0.90


def test_limitations_name_the_flagged_slice_the_small_class_and_loose_calibration():
    limitations = card.limitations(make_facts())

    assert any("class 1 is 0.8000 on 30 eval examples, 0.1700 below" in t for t in limitations)
    assert not any("class 0 is" in t for t in limitations)  # not flagged
    assert any("fewer than 20 examples of class(es) 1:" in t for t in limitations)
    assert any("expected calibration error 0.0800" in t for t in limitations)
    calm = card.limitations(
        make_facts(slices=[], per_class=[], calibration=Calibration(0.01, 347, []))
    )
    assert len(calm) == 1 and "images of another kind" in calm[0]


def test_tradeoffs_give_each_variant_its_figures_or_why_it_is_not_served():
    tradeoffs = card.tradeoffs(make_facts())

    assert tradeoffs == [
        "The int8 TFLite variant (tflite/int8.tflite): accuracy 0.9600, 107.4 KB, "
        "0.200 ms per image.",
        "The float16 variant is not served: accuracy 0.9000 is 0.07 below the SavedModel's.",
    ]


def test_the_version_says_what_changed_against_the_last_blessed_model():
    first = card.model_card(make_facts())["model_details"]["version"]
    later = card.model_card(
        make_facts(
            baseline_metrics={"accuracy": 0.95},
            blessing=Blessing(True, "the Evaluator (TFMA)", "passed", baseline_model_id=5),
        )
    )["model_details"]["version"]

    assert first == {
        "name": "1796322718",
        "date": "2026-12-03",
        "diff": "The first blessed model: no earlier model to compare with.",
    }
    assert later["diff"] == (
        "Eval accuracy 0.9700 against 0.9500 for the last blessed model (model 5 in ML "
        "Metadata) on the same eval split (+0.0200)."
    )


def test_the_details_say_who_blessed_it_how_it_served_and_which_artifacts_it_came_from():
    details = card.model_card(make_facts())["model_details"]

    assert details["name"] == "digits cnn_bn"
    assert (
        "Blessed: yes, by the Evaluator (TFMA): passed every threshold." in details["documentation"]
    )
    assert "Serving check before the push: passed (serving_default" in details["documentation"]
    assert "Model 8 at /root/Trainer/model/8; ModelBlessing 9 at /b/9." in details["documentation"]
    assert details["references"] == [{"reference": "file:///srv/serving/1796322718"}]


def test_a_temperature_the_model_serves_with_is_in_the_output_format():
    fit = {
        "temperature": 1.7,
        "examples": 347,
        "calibration_error_before": 0.08,
        "calibration_error_after": 0.02,
        "applied": True,
    }
    scaled = make_facts(training={"model": "cnn_bn", "temperature_scaling": fit})
    not_applied = make_facts(
        training={"model": "cnn_bn", "temperature_scaling": {**fit, "applied": False}}
    )

    assert (
        "Temperature-scaled (T = 1.700"
        in card.model_card(scaled)["model_parameters"]["output_format"]
    )
    assert "Temperature" not in card.model_card(not_applied)["model_parameters"]["output_format"]


def test_the_page_shows_every_metric_and_escapes_what_it_quotes():
    facts = make_facts(serving_check="failed: <script>alert(1)</script>")
    made = card.model_card(facts)
    page = render_html(made)

    assert "<script>alert" not in page and "&lt;script&gt;" in page
    assert page.count("<tr><td>") == len(made["quantitative_analysis"]["performance_metrics"])
    assert "digits cnn_bn" in page and "class: 1" in page
    assert made["considerations"]["limitations"][1]["description"].split(" is ")[0] in page


def test_a_card_is_written_whole_once_and_never_replaced(tmp_path):
    first = card.model_card(make_facts())
    path = write_model_card(str(tmp_path), first)

    assert path == str(tmp_path / CARD_JSON) and (tmp_path / CARD_HTML).is_file()
    assert read_model_card(str(tmp_path)) == first
    assert sorted(p.name for p in tmp_path.iterdir()) == [CARD_HTML, CARD_JSON]  # nothing aside

    write_model_card(str(tmp_path), card.model_card(make_facts(version="2")))
    assert read_model_card(str(tmp_path)) == first


def test_a_card_cut_short_leaves_no_json(tmp_path, monkeypatch):
    def broken(text):
        raise KeyboardInterrupt

    monkeypatch.setattr(json, "dumps", lambda *a, **k: broken(a))
    with pytest.raises(KeyboardInterrupt):
        write_model_card(str(tmp_path), card.model_card(make_facts()))

    assert read_model_card(str(tmp_path)) is None
    assert [p.name for p in tmp_path.iterdir()] == [CARD_HTML]  # no partial file is left


@pytest.mark.parametrize("card_already_there", [False, True])
def test_what_a_killed_writer_left_beside_the_card_is_removed(tmp_path, card_already_there):
    if card_already_there:
        write_model_card(str(tmp_path), card.model_card(make_facts()))
    for name in (CARD_HTML, CARD_JSON):  # as kill -9 mid-write leaves them
        left = tmp_path / f".{name}.partial-0123456789ab"
        left.mkdir()
        (left / name).write_text("{half a car")
    (tmp_path / "saved_model.pb").write_text("the version's own")  # never touched

    write_model_card(str(tmp_path), card.model_card(make_facts()))

    assert sorted(p.name for p in tmp_path.iterdir()) == [CARD_HTML, CARD_JSON, "saved_model.pb"]
    assert read_model_card(str(tmp_path)) == card.model_card(make_facts())


def test_the_data_says_which_spans_a_window_of_spans_holds():
    spans = load_config(
        None,
        {
            "output_dir": "/tmp/unused",
            "dataset.file_pattern": "span-{SPAN}/*.tfrecord",
            "dataset.span_window": 2,
        },
    ).dataset
    window = make_facts(dataset=spans, data=[DataSplit("train", 1198, 3)])
    (train,) = card.model_card(window)["model_parameters"]["data"]
    assert train["description"].startswith("1,198 examples of the 2 newest spans up to span 3,")
    one = make_facts(dataset=spans.model_copy(update={"span_window": 1}), data=window.data)
    (train,) = card.model_card(one)["model_parameters"]["data"]
    assert train["description"].startswith("1,198 examples of span 3,")
