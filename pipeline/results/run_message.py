"""The one message a webhook hears about a run: its outcome, key metrics and where to look.

Built from the same RunSummary the terminal shows, so the message and the
run's exit code never disagree about how the run ended. On Vertex AI the exit
handler builds that summary from the finished job (kubeflow/job_summary.py), so
both messages read alike.
"""

from __future__ import annotations

import socket
from typing import Any

from tpu_pipeline.common.config import PipelineConfig
from tpu_pipeline.common.webhook import post_notification, slack_message
from tpu_pipeline.pipeline.results.run_outcome import (
    BLESSED_AND_PUSHED,
    BLESSED_NOT_PUSHED,
    DATA_REJECTED,
    FAILED,
    INTERRUPTED,
    NOT_BLESSED,
    run_outcome,
)
from tpu_pipeline.pipeline.results.run_summary import RunSummary

__all__ = [
    "BLESSED_AND_PUSHED",
    "BLESSED_NOT_PUSHED",
    "DATA_REJECTED",
    "FAILED",
    "INTERRUPTED",
    "NOT_BLESSED",
    "notify_run",
    "run_message",
    "run_outcome",
]

# Shown first, in this order, when the Evaluator computed them.
_KEY_METRICS = ("accuracy", "example_count")


def _why(summary: RunSummary, outcome: str) -> str:
    if outcome == INTERRUPTED:
        return f"by {summary.interrupted}; the same command resumes it"
    if outcome in (DATA_REJECTED, FAILED):
        return (summary.error or "").splitlines()[0] if summary.error else ""
    if outcome == BLESSED_AND_PUSHED:
        return f"{summary.blessing_reason}; {summary.push_note}"
    return summary.blessing_reason or summary.push_note


def run_message(
    summary: RunSummary, report: str | None, where: str | None = None
) -> dict[str, Any]:
    """The Slack-compatible message for `summary`.

    Args:
      summary: the finished run's summary.
      report: the `report: PATH` line the terminal shows, or None (an interrupted run);
        on Vertex AI, the `run: URL` line of the job's console page.
      where: where the run ran, for the title; by default this machine's host name.
    """
    outcome = run_outcome(summary)
    why = _why(summary, outcome)
    text = f"tpu-pipeline {summary.pipeline} on {where or socket.gethostname()}: *{outcome}*"
    details = [why] if why else []
    if summary.metrics:
        names = [m for m in _KEY_METRICS if m in summary.metrics]
        shown = ", ".join(f"{name}={summary.metrics[name]:.4g}" for name in names)
        if summary.baseline_metrics and "accuracy" in summary.baseline_metrics:
            shown += f" (baseline accuracy={summary.baseline_metrics['accuracy']:.4g})"
        details.append(f"metrics: {shown}")
    if any(s.flagged for s in summary.slices):
        details.append(summary.describe_slices())
    if summary.span_shifted:
        details.append(summary.span_shift["headline"])
    if summary.pushed_model:
        details.append(f"pushed: {summary.pushed_model}")
    if report:
        details.append(report)
    if summary.log_file:
        details.append(f"logs: {summary.log_file}")
    return slack_message(text, details)


def notify_run(config: PipelineConfig, summary: RunSummary, report: str | None) -> str | None:
    """Posts the run's message to the `notify:` webhook, if set; returns a warning if it was not
    taken.

    Takes at most `notify.timeout_seconds` (twice that with `webhook_secret`: reading it,
    then posting); never raises for the webhook's sake.
    """
    if config.notify is None:
        return None
    return post_notification(config.notify, run_message(summary, report))
