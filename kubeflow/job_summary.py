"""A finished Vertex AI pipeline job, read back as the RunSummary a local run gets.

The exit handler is given only the DAG's final status. The job itself
(PipelineService.GetPipelineJob) lists every task's state and output artifacts
(`job_detail.task_details[].outputs[key].artifacts[]`), and TFX's Vertex
entrypoint records an artifact's properties and custom properties as keys of
its `metadata` (`kubeflow_v2_entrypoint_utils.to_runtime_artifact`; integers
arrive as floats, `blessed: 1.0`). From those come what the local summary reads
from ML Metadata, through the same code: the DataGate's verdict with
ExampleValidator's anomalies, the Evaluator's metrics (its TFMA output, on Cloud
Storage) and blessing, the Pusher's push, and for a run of spans the new span's
images against the served model's (the two models' drift references, on Cloud Storage),
or the SpanShiftGate's verdict where it decided the push (`drift.block_push`).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from kfp.pipeline_spec import pipeline_spec_pb2

from tpu_pipeline.common.config import DriftConfig, EvaluatorConfig
from tpu_pipeline.common.tfx_api import ExampleAnomalies
from tpu_pipeline.common.vertex_api import ApiCall, connect, send
from tpu_pipeline.components.data_checks.anomalies import (
    DataRejectedError,
    describe_anomalies,
    rejection_message,
)
from tpu_pipeline.components.evaluation.results import class_metrics
from tpu_pipeline.components.span_shift_gate import SHIFTED_PROPERTY, VERDICT_KEY, read_gate_verdict
from tpu_pipeline.pipeline.results.run_summary import RunSummary
from tpu_pipeline.pipeline.wiring.node_ids import SERVED_MODEL_OUTPUTS, NodeIds

if TYPE_CHECKING:  # imported where used: aiplatform_v1 takes ~3 s, which compiling need not pay
    from google.cloud.aiplatform_v1 import types as gca

_JOB_NAME = re.compile(
    r"^projects/(?P<project>[^/]+)/locations/(?P<region>[^/]+)/pipelineJobs/(?P<job>[^/]+)$"
)


class ArtifactReadError(RuntimeError):
    """An artifact the job lists could not be read (TFMA's loaders can fail without a word)."""


def error_line(error: BaseException) -> str:
    """`Type: first line of the message`, or the type alone when there is no message."""
    message = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


@contextlib.contextmanager
def _reading(what: str, uri: str) -> Iterator[None]:
    """Names the artifact and its URI in any error reading it."""
    try:
        yield
    except Exception as error:
        raise ArtifactReadError(f"{what} at {uri}: {error_line(error)}") from error


def job_name_parts(resource_name: str) -> dict[str, str] | None:
    """`project`, `region` and `job` of a pipeline job's resource name, or None."""
    match = _JOB_NAME.match(resource_name)
    return match.groupdict() if match else None


def read_pipeline_job(resource_name: str) -> gca.PipelineJob:
    """The pipeline job `resource_name`, from Vertex AI in the job's own region.

    Raises:
      VertexUnreachableError: no credentials, or no network to the region's endpoint.
      ValueError: `resource_name` names no pipeline job.
    """
    parts = job_name_parts(resource_name)
    if parts is None:
        raise ValueError(f"{resource_name!r} is not a pipeline job's resource name")
    from google.cloud.aiplatform_v1 import types as gca

    region = parts["region"]
    call = ApiCall("PipelineService.GetPipelineJob", gca.GetPipelineJobRequest(name=resource_name))
    return send(call, region, connect(region))


def _component_tasks(job: gca.PipelineJob) -> dict[str, gca.PipelineTaskDetail]:
    """The job's component tasks by name: not the DAGs holding them (the root, `tfx-dag`)."""
    tasks = job.job_detail.task_details
    parents = {task.parent_task_id for task in tasks}
    return {task.task_name: task for task in tasks if task.task_id not in parents}


def _output(
    tasks: dict[str, gca.PipelineTaskDetail],
    task_name: str,
    key: str,
    written_property: str | None = None,
) -> gca.Artifact | None:
    """The task's `key` artifact, if listed and, given `written_property`, its executor set it
    (a failed task's outputs are listed unwritten)."""
    task = tasks.get(task_name)
    artifacts = task.outputs[key].artifacts if task is not None and key in task.outputs else []
    if artifacts and (written_property is None or written_property in artifacts[0].metadata):
        return artifacts[0]
    return None


def model_run_uri(job: gca.PipelineJob) -> str | None:
    """Where the Trainer wrote its TensorBoard logs (its `model_run`), if it ran."""
    found = _output(_component_tasks(job), NodeIds.TRAINER, "model_run")
    return found.uri if found is not None and found.uri else None


def _rejection(tasks: dict[str, gca.PipelineTaskDetail], data_gate: gca.PipelineTaskDetail) -> str:
    """Why the DataGate stopped the run: ExampleValidator's anomalies, one per problem."""
    anomalies = _output(tasks, NodeIds.EXAMPLE_VALIDATOR, "anomalies", "split_names")
    problems = []
    if anomalies is not None:
        artifact = ExampleAnomalies()
        artifact.uri = anomalies.uri
        artifact.split_names = anomalies.metadata["split_names"]
        with _reading("ExampleValidator's anomalies", anomalies.uri):
            problems = describe_anomalies(artifact)
    if not problems:  # the label mix drifted: only the DataGate's log says how
        return f"{NodeIds.DATA_GATE}: {data_gate.error.message or 'the data was rejected'}"
    return f"{DataRejectedError.__name__}: {rejection_message(problems)}"


def job_summary(
    pipeline_name: str,
    status: pipeline_spec_pb2.PipelineTaskFinalStatus,
    job: gca.PipelineJob,
    class_names: Sequence[str] = (),
    evaluator: EvaluatorConfig | None = None,
    drift: DriftConfig | None = None,
) -> RunSummary:
    """The run's summary from the DAG's final `status` and the `job`'s tasks and artifacts;
    `class_names` name the class slices and `evaluator` flags the slices, as locally;
    `drift`, given for a run of spans, judges the new span's images against the served
    model's (the Evaluator's baseline), as locally.

    Raises:
      LookupError: the DAG succeeded but the Evaluator's or the Pusher's artifact is
        missing or unwritten, so the outcome cannot be told.
      ArtifactReadError: TFMA or TFDV could not read an artifact's files.
    """
    from google.cloud.aiplatform_v1 import types as gca

    state = gca.PipelineTaskDetail.State
    tasks = _component_tasks(job)
    summary = RunSummary.without_results(pipeline_name, [], None, None)
    summary.class_names = list(class_names)
    summary.succeeded = status.state == "SUCCEEDED"
    # The first task to fail stopped the run (the DAG's own error only lists them).
    failed = sorted(
        (task for task in tasks.values() if task.state == state.FAILED),
        key=lambda task: task.end_time,
    )
    if status.state == "CANCELLED":
        stopped = [name for name, task in tasks.items() if task.state == state.CANCELLED]
        summary.interrupted = "a cancel" + (f" during {stopped[0]}" if stopped else "")
        summary.error = f"interrupted by {summary.interrupted}"
    elif failed and failed[0].task_name == NodeIds.DATA_GATE:
        summary.data_rejected = True
        summary.error = _rejection(tasks, failed[0])
    elif failed:
        summary.error = f"{failed[0].task_name}: {failed[0].error.message}"
    elif not summary.succeeded:
        summary.error = status.error.message or status.state.lower()

    blessing = _output(tasks, NodeIds.EVALUATOR, "blessing", "blessed")
    evaluation = _output(tasks, NodeIds.EVALUATOR, "evaluation")
    pushed = _output(tasks, NodeIds.PUSHER, "pushed_model", "pushed")
    if summary.succeeded and (blessing is None or evaluation is None or pushed is None):
        raise LookupError(
            "the job lists no written Evaluator evaluation and blessing, or Pusher pushed_model"
        )
    if blessing is not None and evaluation is not None:
        with _reading("the Evaluator's evaluation", evaluation.uri):
            summary.add_evaluation(evaluation.uri, bool(blessing.metadata["blessed"]), evaluator)
            # As locally (pipeline/results/parts/evaluation.py): each class's precision, recall
            if class_names:
                summary.per_class_metrics = class_metrics(evaluation.uri, class_names)
        served = blessing.metadata.get("baseline_model")
        # The new model's drift reference is in the model the Evaluator judged.
        models = (_output(tasks, node, key) for node, key in SERVED_MODEL_OUTPUTS)
        model = next((found for found in models if found is not None), None)
        # The SpanShiftGate's verdict decided the push (`drift.block_push`): it is the check.
        gate = _output(tasks, NodeIds.SPAN_SHIFT_GATE, VERDICT_KEY, SHIFTED_PROPERTY)
        if gate is not None:
            with _reading("the SpanShiftGate's verdict", gate.uri):
                summary.span_shift = read_gate_verdict(gate.uri)
        elif drift is not None and served and model is not None:
            summary.add_span_shift(model.uri, served, drift)
    if pushed is not None:
        summary.add_push(pushed.metadata.get)
    return summary
