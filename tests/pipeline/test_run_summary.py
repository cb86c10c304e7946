"""What a run says: the serving check, when it passed and when it stopped the push, and memory."""

from __future__ import annotations

import json

from tpu_pipeline.common.memory_meter import HIGH_WATER_MARK, MemoryPeak
from tpu_pipeline.components.serving.server_check import ServingCheckError
from tpu_pipeline.pipeline.results.run_summary import ComponentResult, RunSummary

GIB = 2**30


def test_a_failed_serving_check_says_which_signature_and_that_nothing_was_pushed():
    error = ServingCheckError("signature 'pixels': answered shape [8, 9], expected [8, 10]")
    summary = RunSummary.without_results(
        "digits", [ComponentResult("Pusher", "failed", 3.0)], error, None
    )
    assert not summary.succeeded
    assert summary.problems() == f"FAILED: ServingCheckError: {error}"
    lines = summary.to_text().splitlines()
    assert "pushed: nothing (the candidate failed the serving check)" in lines
    assert f"serving check: failed: {error}" in lines
    assert json.loads(summary.to_json())["serving_check"] == f"failed: {error}"


def test_a_run_stopped_before_the_pusher_says_nothing_about_the_check():
    summary = RunSummary.without_results("digits", [], RuntimeError("Trainer failed"), None)
    assert summary.serving_check is None
    assert "serving check" not in summary.to_text()
    assert "pushed: nothing (the run stopped before the Pusher)" in summary.to_text()


def test_a_failed_serving_check_names_the_server_that_ran_it():
    error = ServingCheckError("signature 'pixels': answered shape [8, 9]", "model_server.py")
    summary = RunSummary.without_results(
        "digits", [ComponentResult("Pusher", "failed", 3.0)], error, None
    )
    facts = json.loads(summary.to_json())
    assert facts["serving_check_server"] == "model_server.py"
    assert facts["serving_check"].endswith("(checked with model_server.py)")


def test_a_passed_serving_check_names_the_server_that_ran_it():
    properties = {
        "pushed": 1,
        "pushed_destination": "/serving/17",
        "serving_check": "passed (serving_default in 0.1 s; tensorflow_model_server up in 2.0 s)",
        "serving_check_server": "tensorflow_model_server",
    }
    summary = RunSummary.without_results("digits", [], None, None)
    summary.add_push(properties.get)
    assert json.loads(summary.to_json())["serving_check_server"] == "tensorflow_model_server"


def test_the_runs_peak_memory_is_a_result_line_and_every_figure_is_in_the_json():
    trainer = ComponentResult("Trainer", "executed", 36.0)
    trainer.add_memory(MemoryPeak(2 * GIB, HIGH_WATER_MARK, None, {"CPU:0": GIB // 2}))
    summary = RunSummary.without_results("digits", [trainer], None, None)
    summary.add_run_memory(
        MemoryPeak(2 * GIB, HIGH_WATER_MARK, GIB // 4, {"CPU:0": GIB}), "Trainer"
    )
    assert "memory: peak 2.0 GiB in Trainer, child 256.0 MiB, TF CPU:0 1.0 GiB" in (
        summary.to_text().splitlines()
    )
    facts = json.loads(summary.to_json())
    assert facts["peak_rss_bytes"] == 2 * GIB and facts["peak_rss_component"] == "Trainer"
    assert facts["peak_rss_measured"] == HIGH_WATER_MARK
    assert facts["child_peak_rss_bytes"] == GIB // 4
    assert facts["tensorflow_peak_bytes"] == {"CPU:0": GIB}
    (component,) = facts["components"]
    assert component["peak_rss_bytes"] == 2 * GIB
    assert component["child_peak_rss_bytes"] is None
    assert component["tensorflow_peak_bytes"] == {"CPU:0": GIB // 2}


def test_a_run_whose_memory_was_not_measured_says_nothing_about_it():
    summary = RunSummary.without_results(
        "digits", [ComponentResult("Pusher", "failed", 3.0)], None, None
    )
    summary.add_run_memory(None, None)
    assert "memory:" not in summary.to_text()
    facts = json.loads(summary.to_json())
    assert facts["peak_rss_bytes"] is None and facts["components"][0]["peak_rss_bytes"] is None


def test_the_model_card_line_names_the_card_or_why_there_is_none():
    pushed = {"pushed": 1, "pushed_destination": "/serving/17"}
    with_card = RunSummary.without_results("digits", [], None, None)
    with_card.add_push({**pushed, "model_card": "/serving/17/model_card.json"}.get)
    without = RunSummary.without_results("digits", [], None, None)
    without.add_push({**pushed, "model_card_error": "OSError: disk full"}.get)

    assert "model card: /serving/17/model_card.json (and model_card.html beside it)" in (
        with_card.to_text()
    )
    assert json.loads(with_card.to_json())["model_card"] == "/serving/17/model_card.json"
    assert "model card: not written (OSError: disk full)" in without.to_text()
    assert json.loads(without.to_json())["model_card"] is None
