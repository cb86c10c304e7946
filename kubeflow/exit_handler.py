"""On Vertex AI, the webhook hears how every run ended, failed runs too: an exit handler.

Vertex runs the exit handler after the pipeline's DAG whatever its outcome,
passing the DAG's final status (KFP's PipelineTaskFinalStatus as JSON): the
state, the error, and the job's resource name. The handler cannot read the
pipeline's artifacts (TFX 1.16 gives exit handlers no input artifacts), so the
message names the outcome, the error and the run's console page, where the
metrics, the blessing and the push are. A failure naming the DataGate is data
rejected: the DataGate fails only to stop data that breaks the schema or drifts.
"""

# No `from __future__ import annotations`: TFX reads the component's type hints as objects.
import re

from absl import logging
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from common.config import PipelineConfig
from common.tfx_api import BaseComponent, FinalStatusStr, Parameter, exit_handler
from common.webhook import post_message, slack_message
from pipeline.pipeline import NodeIds
from pipeline.run_message import DATA_REJECTED, FAILED, INTERRUPTED

SUCCEEDED = "succeeded"
_OUTCOMES = {"SUCCEEDED": SUCCEEDED, "FAILED": FAILED, "CANCELLED": INTERRUPTED}
_JOB_NAME = re.compile(
    r"^projects/(?P<project>[^/]+)/locations/(?P<region>[^/]+)/pipelineJobs/(?P<job>[^/]+)$"
)


def vertex_run_message(pipeline_name: str, final_status: str) -> dict:
    """The Slack-compatible message for a Vertex AI run's final status (JSON)."""
    status = json_format.Parse(
        final_status, pipeline_spec_pb2.PipelineTaskFinalStatus(), ignore_unknown_fields=True
    )
    outcome = _OUTCOMES.get(status.state, status.state.lower() or FAILED)
    # Vertex's error names the failed tasks (its exact wording is not checked here: offline).
    if outcome == FAILED and re.search(rf"\b{NodeIds.DATA_GATE}\b", status.error.message):
        outcome = DATA_REJECTED
    details = [status.error.message] if status.error.message else []
    job = _JOB_NAME.match(status.pipeline_job_resource_name)
    if job:
        details.append(
            "run: https://console.cloud.google.com/vertex-ai/locations/{region}/pipelines/runs/"
            "{job}?project={project} (metrics, blessing and push)".format(**job.groupdict())
        )
    return slack_message(f"tpu-pipeline {pipeline_name} on Vertex AI: *{outcome}*", details)


@exit_handler
def NotifyWebhook(  # noqa: N802 (TFX names the component after the function)
    final_status: Parameter[str],
    webhook: Parameter[str],
    timeout_seconds: Parameter[float],
    pipeline_name: Parameter[str],
):
    """Posts the run's outcome; a webhook that fails or hangs is one warning, not a failed step."""
    warning = post_message(
        webhook, vertex_run_message(pipeline_name, final_status), timeout_seconds
    )
    if warning:
        logging.warning("%s; the run's result stands", warning)


def notify_exit_handler(config: PipelineConfig) -> BaseComponent | None:
    """The exit handler for `config.notify`, or None when nothing is to be told."""
    if config.notify is None:
        return None
    return NotifyWebhook(
        final_status=FinalStatusStr(),
        webhook=config.notify.webhook,
        timeout_seconds=config.notify.timeout_seconds,
        pipeline_name=config.full_pipeline_name,
    )
