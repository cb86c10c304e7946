"""On Vertex AI, after every run, failed runs too: the webhook hears how it ended, and Vertex AI
Experiments logs it. One exit handler does both (TFX 1.16 takes one), each only if asked.

Vertex runs the exit handler after the pipeline's DAG whatever its outcome,
passing the DAG's final status (KFP's PipelineTaskFinalStatus as JSON): the
state, the error, and the job's resource name. TFX 1.16 gives exit handlers no
input artifacts, so the handler reads the job back from Vertex AI (its tasks and
their artifacts, kubeflow/job_summary.py) and sends the message a local run
sends (pipeline/results/run_message.py): blessed and pushed, not blessed, data rejected,
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

With `tracking.vertex_experiment`, the same summary is logged as a run of that
experiment (kubeflow/vertex_experiments.py): the configuration as compiled (its
secret-aware dump, a parameter of the handler) as params, the summary's final figures
as metrics, the DAG's final state as the run's state, and with
`tracking.vertex_tensorboard` the Trainer's per-epoch histories (its TensorBoard logs on
Cloud Storage) as time series; within `tracking.budget_seconds`, one warning if it cannot.
"""

# No `from __future__ import annotations`: TFX reads the component's type hints as objects.
import dataclasses
import json
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from absl import logging
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from tpu_pipeline.common.config import DriftConfig, EvaluatorConfig, NotifyConfig, PipelineConfig
from tpu_pipeline.common.tfx_api import BaseComponent, FinalStatusStr, Parameter, exit_handler
from tpu_pipeline.common.timeouts import call_with_timeout
from tpu_pipeline.common.vertex_api import connect
from tpu_pipeline.common.vertex_api import send as vertex_api_send
from tpu_pipeline.common.webhook import post_notification, slack_message
from tpu_pipeline.kubeflow.cluster_config import require_webhook_secret, vertex_pipeline_config
from tpu_pipeline.kubeflow.job_summary import (
    error_line,
    job_name_parts,
    job_summary,
    model_run_uri,
    read_pipeline_job,
)
from tpu_pipeline.kubeflow.vertex_experiments import (
    ExperimentRun,
    Send,
    experiment_run,
    log_experiment_run,
)
from tpu_pipeline.pipeline.results.run_message import (
    DATA_REJECTED,
    FAILED,
    INTERRUPTED,
    run_message,
)
from tpu_pipeline.pipeline.results.run_summary import RunSummary
from tpu_pipeline.pipeline.wiring.node_ids import NodeIds

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


@dataclasses.dataclass
class FinishedJob:
    """What the exit handler knows of the run that ended.

    `status` is the DAG's final status (None when what Vertex passed is unreadable);
    `summary` the run summary read back from the job, or None, `unread` saying why;
    `model_run` the Trainer's TensorBoard logs, if it ran.
    """

    pipeline_name: str
    status: pipeline_spec_pb2.PipelineTaskFinalStatus | None
    summary: RunSummary | None
    unread: str = ""
    model_run: str | None = None


def read_finished_job(
    pipeline_name: str,
    final_status: str,
    read_job: "Callable[[str], gca.PipelineJob] | None" = None,
    budget_s: float = READ_BUDGET_S,
    class_names: Sequence[str] = (),
    evaluator: EvaluatorConfig | None = None,
    drift: DriftConfig | None = None,
) -> FinishedJob:
    """The run's final status and its summary, read from the job within `budget_s`.

    Args:
      pipeline_name: the pipeline's name.
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
        return FinishedJob(pipeline_name, None, None, error_line(error))
    name = status.pipeline_job_resource_name
    read_job = read_job or read_pipeline_job
    model_run: list[str | None] = []

    def read() -> RunSummary:
        job = read_job(name)
        model_run.append(model_run_uri(job))
        return job_summary(pipeline_name, status, job, class_names, evaluator, drift)

    try:
        summary = call_with_timeout(read, budget_s, f"reading {name or 'the pipeline job'}")
    except Exception as error:  # whatever it is, the people waiting still hear the outcome
        logging.warning("Could not read the job's results: %s", error_line(error))
        found = model_run[0] if model_run else None
        return FinishedJob(pipeline_name, status, None, error_line(error), found)
    return FinishedJob(pipeline_name, status, summary, "", model_run[0])


def job_message(job: FinishedJob) -> dict:
    """The Slack-compatible message for a finished job: the local run's message, or what the
    final status alone says when the job's results could not be read."""
    if job.status is None:
        return slack_message(
            f"tpu-pipeline {job.pipeline_name} on {WHERE}: *{UNKNOWN}*",
            [f"the final status Vertex AI passed is unreadable: {job.unread}"],
        )
    if job.summary is None:
        return _status_message(job.pipeline_name, job.status, job.unread)
    return run_message(job.summary, _console_line(job.status.pipeline_job_resource_name), WHERE)


def vertex_run_message(
    pipeline_name: str,
    final_status: str,
    read_job: "Callable[[str], gca.PipelineJob] | None" = None,
    budget_s: float = READ_BUDGET_S,
    class_names: Sequence[str] = (),
    evaluator: EvaluatorConfig | None = None,
    drift: DriftConfig | None = None,
) -> dict:
    """The Slack-compatible message for a Vertex AI run's final status (JSON); the arguments
    are `read_finished_job`'s."""
    return job_message(
        read_finished_job(
            pipeline_name, final_status, read_job, budget_s, class_names, evaluator, drift
        )
    )


def _tell(job: FinishedJob, webhook_secret: str, timeout_seconds: float) -> None:
    """Posts the run's outcome to the webhook; a failure is one warning."""
    try:
        notify = NotifyConfig(webhook_secret=webhook_secret, timeout_seconds=timeout_seconds)
        warning = post_notification(notify, job_message(job))
    except Exception as error:  # the run's result stands whatever happened here
        warning = f"the run's outcome was not told: {error_line(error)}"
    if warning:
        logging.warning("%s; the run's result stands", warning)


def _log_experiment(
    job: FinishedJob, experiment: str, run_config: str, budget_s: float, send: Send | None
) -> None:
    """Logs the run to Vertex AI Experiments within `budget_s`; a failure is one warning."""
    try:
        status = job.status
        parts = job_name_parts(status.pipeline_job_resource_name) if status else None
        if parts is None:
            raise ValueError("the final status names no pipeline job to log the run of")
        location = f"projects/{parts['project']}/locations/{parts['region']}"
        config = PipelineConfig.model_validate_json(run_config)
        if send is None:
            region = parts["region"]
            credentials = connect(region)
            send = lambda call: vertex_api_send(call, region, credentials)  # noqa: E731

        def log() -> ExperimentRun:
            histories, unread = _histories(job, config)
            run = experiment_run(
                location,
                experiment,
                parts["job"],
                config,
                job.summary,
                status.state,
                job.unread,
                histories,
                unread,
            )
            log_experiment_run(run, send)
            return run

        run = call_with_timeout(log, budget_s, f"logging to experiment {experiment}")
        logging.info("Logged the run to Vertex AI Experiments: %s", run.run_context)
    except Exception as error:  # the run's result stands whatever happened here
        logging.warning(
            "the run was not logged to Vertex AI Experiments %s: %s; the run's result stands",
            experiment,
            error_line(error),
        )


def _histories(job: FinishedJob, config: PipelineConfig) -> tuple[dict, str]:
    """The Trainer's per-epoch histories when they have a TensorBoard to go to, and why they
    could not be read (the run is logged without them then)."""
    if config.tracking.vertex_tensorboard is None or job.model_run is None:
        return {}, ""
    from tpu_pipeline.pipeline.tracking.record import histories_of

    try:
        return histories_of(job.model_run), ""
    except Exception as error:  # the run's params and metrics still go
        return {}, f"{job.model_run}: {error_line(error)}"


@exit_handler
def RunEnded(  # noqa: N802 (TFX names the component after the function)
    final_status: Parameter[str],
    webhook_secret: Parameter[str],
    timeout_seconds: Parameter[float],
    pipeline_name: Parameter[str],
    class_names: Parameter[str],
    evaluator_config: Parameter[str],
    drift_config: Parameter[str],
    experiment: Parameter[str],
    run_config: Parameter[str],
    experiment_budget_seconds: Parameter[float],
):
    """Tells the webhook (`webhook_secret`, if not empty) how the run ended and logs it to
    Vertex AI Experiments (`experiment`, if not empty); whatever fails is one warning in the
    log, never a failed step.

    `class_names` (a JSON list) and `evaluator_config` (the `evaluator:` section as JSON)
    name and flag the slices as a local run does; `drift_config` (the `drift:` section
    as JSON, empty unless the data comes in spans) judges the new span's images;
    `run_config` is the configuration as compiled (its secret-aware dump), the
    experiment run's params.
    """
    try:
        job = read_finished_job(
            pipeline_name,
            final_status,
            class_names=json.loads(class_names),
            evaluator=EvaluatorConfig.model_validate_json(evaluator_config),
            drift=DriftConfig.model_validate_json(drift_config) if drift_config else None,
        )
    except Exception as error:  # malformed parameters: still tell and log what is known
        job = FinishedJob(pipeline_name, None, None, error_line(error))
    if webhook_secret != "":  # empty: no webhook configured (anything else is tried)
        _tell(job, webhook_secret, timeout_seconds)
    if experiment:
        _log_experiment(job, experiment, run_config, experiment_budget_seconds, None)


def run_ended_handler(config: PipelineConfig) -> BaseComponent | None:
    """The exit handler for `config.notify` and `tracking.vertex_experiment`, or None when
    there is nothing to tell or log.

    Raises:
      ConfigError: `notify.webhook` is set; on Vertex AI the URL must come from
        `notify.webhook_secret` (kubeflow/runner.py, `require_webhook_secret`).
    """
    notify = require_webhook_secret(config)
    experiment = config.tracking.vertex_experiment
    if notify is None and experiment is None:
        return None
    return RunEnded(
        final_status=FinalStatusStr(),
        webhook_secret=notify.webhook_secret if notify else "",
        timeout_seconds=notify.timeout_seconds
        if notify
        else NotifyConfig.model_fields["timeout_seconds"].default,
        pipeline_name=config.full_pipeline_name,
        class_names=json.dumps(list(config.dataset.class_names)),
        evaluator_config=config.evaluator.model_dump_json(),
        drift_config=config.drift.model_dump_json() if config.dataset.reads_spans else "",
        experiment=experiment or "",
        run_config=vertex_pipeline_config(config).model_dump_json() if experiment else "",
        experiment_budget_seconds=config.tracking.budget_seconds,
    )
