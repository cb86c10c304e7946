"""On Vertex AI, the webhook hears how every run ended, failed runs too: an exit handler.

Vertex runs the exit handler after the pipeline's DAG whatever its outcome,
passing the DAG's final status (KFP's PipelineTaskFinalStatus as JSON): the
state, the error, and the job's resource name. TFX 1.16 gives exit handlers no
input artifacts, so the handler reads the job back from Vertex AI (its tasks and
their artifacts, kubeflow/job_summary.py) and sends the message a local run
sends (pipeline/run_message.py): blessed and pushed, not blessed, data rejected,
failed or interrupted, with the key metrics, the push and the run's console page.

Reading the job (credentials, the API, the artifacts on Cloud Storage) takes at
most READ_BUDGET_S; when it fails or takes longer, the message falls back to what
the final status alone says (succeeded, failed, data rejected when the error
names the DataGate, interrupted) plus one line saying why the metrics are not
there. Posting then takes at most `notify.timeout_seconds`, as locally.

The webhook's URL is in no parameter of the compiled spec: the handler gets the
name of the Secret Manager version holding it (`notify.webhook_secret`) and reads
it when it posts. Whatever happens (a malformed final status, an unreadable
secret, a failure building the message), the handler logs one line and its step
succeeds: a notification never turns a run's result into a failure.
"""

# No `from __future__ import annotations`: TFX reads the component's type hints as objects.
import json
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from absl import logging
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from common.config import DriftConfig, EvaluatorConfig, NotifyConfig, PipelineConfig
from common.tfx_api import BaseComponent, FinalStatusStr, Parameter, exit_handler
from common.timeouts import call_with_timeout
from common.webhook import post_notification, slack_message
from kubeflow.job_summary import error_line, job_name_parts, job_summary, read_pipeline_job
from kubeflow.runner import require_webhook_secret
from pipeline.pipeline import NodeIds
from pipeline.run_message import DATA_REJECTED, FAILED, INTERRUPTED, run_message

if TYPE_CHECKING:
    from google.cloud.aiplatform_v1 import types as gca

# Reading the job is a few API and Cloud Storage calls (TFMA is imported with the
# pipeline already); a fixed bound, apart from the webhook's, so a stuck call
# cannot hold the step.
READ_BUDGET_S = 30.0
SUCCEEDED = "succeeded"
UNKNOWN = "outcome unknown"
_OUTCOMES = {"SUCCEEDED": SUCCEEDED, "FAILED": FAILED, "CANCELLED": INTERRUPTED}
WHERE = "Vertex AI"


def _console_line(resource_name: str) -> str | None:
    parts = job_name_parts(resource_name)
    if parts is None:
        return None
    return (
        "run: https://console.cloud.google.com/vertex-ai/locations/{region}/pipelines/runs/"
        "{job}?project={project}".format(**parts)
    )


def _status_message(
    pipeline_name: str, status: pipeline_spec_pb2.PipelineTaskFinalStatus, unread: str
) -> dict:
    """What the final status alone says, and `unread`: why the job's results are not shown."""
    outcome = _OUTCOMES.get(status.state, status.state.lower() or UNKNOWN)
    # Vertex's error names the failed tasks (its exact wording is not checked here: offline).
    if outcome == FAILED and re.search(rf"\b{NodeIds.DATA_GATE}\b", status.error.message):
        outcome = DATA_REJECTED
    details = [status.error.message] if status.error.message else []
    details.append(f"metrics, blessing and push not read: {unread}")
    console = _console_line(status.pipeline_job_resource_name)
    if console:
        details.append(console)
    return slack_message(f"tpu-pipeline {pipeline_name} on {WHERE}: *{outcome}*", details)


def vertex_run_message(
    pipeline_name: str,
    final_status: str,
    read_job: "Callable[[str], gca.PipelineJob] | None" = None,
    budget_s: float = READ_BUDGET_S,
    class_names: Sequence[str] = (),
    evaluator: EvaluatorConfig | None = None,
    drift: DriftConfig | None = None,
) -> dict:
    """The Slack-compatible message for a Vertex AI run's final status (JSON).

    Args:
      pipeline_name: the pipeline's name, for the title.
      final_status: KFP's PipelineTaskFinalStatus of the DAG, as JSON.
      read_job: reads the pipeline job by its resource name; by default from Vertex AI.
      budget_s: the most reading the job and its artifacts may take.
      class_names: every class's name, in label order, for the slices.
      evaluator: the run's `evaluator:` section, whose margin flags weak slices.
      drift: the run's `drift:` section for a run of spans (its new span is compared with
        the served model's images); None otherwise.
    """
    try:
        status = json_format.Parse(
            final_status, pipeline_spec_pb2.PipelineTaskFinalStatus(), ignore_unknown_fields=True
        )
    except Exception as error:  # not JSON, or not a final status: still tell that the run ended
        logging.warning("The final status is unreadable: %s", error_line(error))
        return slack_message(
            f"tpu-pipeline {pipeline_name} on {WHERE}: *{UNKNOWN}*",
            [f"the final status Vertex AI passed is unreadable: {error_line(error)}"],
        )
    name = status.pipeline_job_resource_name
    read_job = read_job or read_pipeline_job
    try:
        summary = call_with_timeout(
            lambda: job_summary(
                pipeline_name, status, read_job(name), class_names, evaluator, drift
            ),
            budget_s,
            f"reading {name or 'the pipeline job'}",
        )
    except Exception as error:  # whatever it is, the people waiting still hear the outcome
        logging.warning("Could not read the job's results: %s", error_line(error))
        return _status_message(pipeline_name, status, error_line(error))
    return run_message(summary, _console_line(name), where=WHERE)


@exit_handler
def NotifyWebhook(  # noqa: N802 (TFX names the component after the function)
    final_status: Parameter[str],
    webhook_secret: Parameter[str],
    timeout_seconds: Parameter[float],
    pipeline_name: Parameter[str],
    class_names: Parameter[str],
    evaluator_config: Parameter[str],
    drift_config: Parameter[str],
):
    """Posts the run's outcome; whatever fails is one warning in the log, never a failed step.

    `class_names` (a JSON list) and `evaluator_config` (the `evaluator:` section as JSON)
    name and flag the slices as a local run does; `drift_config` (the `drift:` section
    as JSON, empty unless the data comes in spans) judges the new span's images.
    """
    try:
        notify = NotifyConfig(webhook_secret=webhook_secret, timeout_seconds=timeout_seconds)
        message = vertex_run_message(
            pipeline_name,
            final_status,
            class_names=json.loads(class_names),
            evaluator=EvaluatorConfig.model_validate_json(evaluator_config),
            drift=DriftConfig.model_validate_json(drift_config) if drift_config else None,
        )
        warning = post_notification(notify, message)
    except Exception as error:  # the run's result stands whatever happened here
        warning = f"the run's outcome was not told: {error_line(error)}"
    if warning:
        logging.warning("%s; the run's result stands", warning)


def notify_exit_handler(config: PipelineConfig) -> BaseComponent | None:
    """The exit handler for `config.notify`, or None when nothing is to be told.

    Raises:
      ConfigError: `notify.webhook` is set; on Vertex AI the URL must come from
        `notify.webhook_secret` (kubeflow/runner.py, `require_webhook_secret`).
    """
    notify = require_webhook_secret(config)
    if notify is None:
        return None
    return NotifyWebhook(
        final_status=FinalStatusStr(),
        webhook_secret=notify.webhook_secret,
        timeout_seconds=notify.timeout_seconds,
        pipeline_name=config.full_pipeline_name,
        class_names=json.dumps(list(config.dataset.class_names)),
        evaluator_config=config.evaluator.model_dump_json(),
        drift_config=config.drift.model_dump_json() if config.dataset.reads_spans else "",
    )
