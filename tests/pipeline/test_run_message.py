"""The webhook's message says how each run ended, with its metrics and where to look."""

from __future__ import annotations

import os
import signal

import pytest

from tpu_pipeline.common.interrupts import RunInterrupted, stop_on_signals
from tpu_pipeline.components.data_checks.anomalies import DataRejectedError
from tpu_pipeline.pipeline.results.run_message import run_message, run_outcome
from tpu_pipeline.pipeline.results.run_summary import ComponentResult, RunSummary

REPORT = "report: /runs/tpu-pipeline-digits/report/report.html"


def summary(error=None, components=(), **results) -> RunSummary:
    finished = RunSummary.without_results(
        "tpu-pipeline-digits", list(components), error, "/runs/logs/run-1.log"
    )
    for name, value in results.items():
        setattr(finished, name, value)
    return finished


def blessed(pushed_model="/runs/serving_model/17", push_note="new version") -> RunSummary:
    return summary(
        metrics={"accuracy": 0.98312, "example_count": 347.0, "loss": 0.05},
        baseline_metrics={"accuracy": 0.97},
        blessed=True,
        blessing_reason="passed every threshold",
        pushed_model=pushed_model,
        push_note=push_note,
    )


def test_a_blessed_and_pushed_run_gives_its_metrics_baseline_push_report_and_logs():
    message = run_message(blessed(), REPORT)
    assert run_outcome(blessed()) == "blessed and pushed"
    title, why, *rest = message["text"].splitlines()
    assert title.startswith("tpu-pipeline tpu-pipeline-digits on ")
    assert title.endswith(": *blessed and pushed*")
    assert why == "passed every threshold; new version"
    assert rest == [
        "metrics: accuracy=0.9831, example_count=347 (baseline accuracy=0.97)",
        "pushed: /runs/serving_model/17",
        REPORT,
        "logs: /runs/logs/run-1.log",
    ]
    assert message["blocks"][0]["text"]["text"] == title


def test_a_span_that_shifted_is_told_after_the_metrics_and_a_steady_one_is_not():
    line = "span shift: 1 of 3 signals moved from the model's reference (728 training images)"
    shifted = blessed()
    shifted.span_shift = {"checked": True, "shifted": True, "headline": line}
    steady = blessed()
    steady.span_shift = {"checked": True, "shifted": False, "headline": "span shift: none"}

    assert run_message(shifted, REPORT)["text"].splitlines()[3] == line
    assert "span shift" not in run_message(steady, REPORT)["text"]


def test_a_model_the_evaluator_refused_is_not_blessed_and_says_why():
    refused = summary(
        metrics={"accuracy": 0.5},
        blessing_reason="accuracy 0.5 is below the lower bound 0.9",
        push_note="not blessed",
    )
    assert run_outcome(refused) == "not blessed"
    lines = run_message(refused, REPORT)["text"].splitlines()
    assert lines[0].endswith("*not blessed*")
    assert lines[1] == "accuracy 0.5 is below the lower bound 0.9"
    assert not any(line.startswith("pushed:") for line in lines)


def test_rejected_data_is_its_own_outcome_naming_the_first_line_of_the_error():
    rejected = summary(DataRejectedError("train: pixels: Out-of-range values\nmore detail"))
    assert run_outcome(rejected) == "data rejected"
    lines = run_message(rejected, REPORT)["text"].splitlines()
    assert lines[0].endswith("*data rejected*")
    assert lines[1] == "DataRejectedError: train: pixels: Out-of-range values"


def test_a_failed_run_names_its_error():
    failed = summary(RuntimeError("Trainer: out of memory"))
    assert run_outcome(failed) == "failed"
    assert run_message(failed, None)["text"].splitlines()[1] == (
        "RuntimeError: Trainer: out of memory"
    )


def test_an_interrupted_run_names_the_signal_and_the_component_it_stopped():
    with stop_on_signals():
        with pytest.raises(RunInterrupted) as raised:
            os.kill(os.getpid(), signal.SIGTERM)
            signal.pause()  # the handler raises here
        stopped = summary(raised.value, [ComponentResult("Trainer", "interrupted", 3.0)])
    assert run_outcome(stopped) == "interrupted"
    lines = run_message(stopped, None)["text"].splitlines()
    assert lines[0].endswith("*interrupted*")
    assert lines[1] == "by SIGTERM during Trainer; the same command resumes it"
    assert not any(line.startswith("report:") for line in lines)


def test_a_blessed_model_the_pusher_did_not_publish_is_told_apart_from_a_push():
    held = blessed(pushed_model=None, push_note="the run stopped before the Pusher")
    assert run_outcome(held) == "blessed, not pushed"
    assert run_message(held, REPORT)["text"].splitlines()[1] == "passed every threshold"


def test_notify_run_posts_to_the_configured_webhook_within_its_timeout():
    from tests.common.webhook_server import webhook_server
    from tpu_pipeline.common.config import load_config
    from tpu_pipeline.pipeline.results.run_message import notify_run

    assert notify_run(load_config(), blessed(), REPORT) is None  # no notify: section, no post
    with webhook_server(hang=True) as (url, server):
        config = load_config(None, {"notify.webhook": url, "notify.timeout_seconds": 0.5})
        warning = notify_run(config, blessed(), REPORT)
        assert not server.release.is_set()  # it returned while the server still hung
    assert warning.endswith("did not answer within 0.5 s")
    ((_, message),) = server.received
    assert message == run_message(blessed(), REPORT)


def test_a_local_run_with_webhook_secret_reads_the_url_from_secret_manager(monkeypatch):
    import tpu_pipeline.common.webhook
    from tests.common.webhook_server import webhook_server
    from tpu_pipeline.common.config import load_config
    from tpu_pipeline.pipeline.results.run_message import notify_run

    name = "projects/my-project/secrets/tpu-pipeline-webhook/versions/latest"
    config = load_config(None, {"notify.webhook_secret": name, "notify.timeout_seconds": 3})
    with webhook_server() as (url, server):
        monkeypatch.setattr(
            tpu_pipeline.common.webhook, "read_secret_version", lambda n, t: {name: url}[n]
        )
        assert notify_run(config, blessed(), REPORT) is None
    assert server.received == [("application/json", run_message(blessed(), REPORT))]
