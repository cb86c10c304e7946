"""A Vertex AI run's per-epoch histories, sent to its experiment run as time series.

Vertex AI Experiments keeps a run's time series in a Vertex AI TensorBoard instance: the
experiment is a TensorboardExperiment of the instance, the run a TensorboardRun of it,
each metric a TensorboardTimeSeries, and an Artifact `<run id>-tb-run` in the metadata
store, linked to the run's context, is how Experiments finds that TensorboardRun. The
requests here are the ones the SDK's `ExperimentRun.assign_backing_tensorboard` and
`log_time_series_metrics` send, built offline from the SDK's own types and names
(`google.cloud.aiplatform.metadata.constants`, checked by
tests/kubeflow/test_vertex_experiments.py), each sent once, as the rest of the run.

The series are the MLflow run's metric histories (pipeline/tracking/record.py, from the
Trainer's TensorBoard logs in `model_run`), step = epoch. Writing a step again overwrites
it, so a retried exit handler leaves each series as one run wrote it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from typing import Any

from google.api_core import exceptions as api_exceptions

from tpu_pipeline.common import vertex_types as gca
from tpu_pipeline.common.vertex_api import ApiCall, api_host

# The SDK's names (google/cloud/aiplatform/metadata/constants.py).
TENSORBOARD_RUN_SCHEMA = "google.VertexTensorboardRun"
TENSORBOARD_RUN_SCHEMA_VERSION = "0.0.1"
TENSORBOARD_RUN_ARTIFACT_SUFFIX = "-tb-run"
TRACKING_LABEL = "vertex_experiment_tracking"
RESOURCE_NAME_KEY = "resourceName"
EXPERIMENT_LABELS = {"vertex_tensorboard_experiment_source": "vertex_experiment"}
BACKING_TENSORBOARD_KEY = "backing_tensorboard_resource"
SCALARS_PLUGIN = "scalars"
# WriteTensorboardRunData takes at most this many points per request.
MAX_POINTS_PER_WRITE = 5000

Send = Callable[[ApiCall], Any]
History = list[tuple[int, float]]


@dataclasses.dataclass(frozen=True)
class TimeSeriesRun:
    """Where one experiment run's series go, and the series (name -> [(epoch, value)])."""

    tensorboard: str  # projects/P/locations/R/tensorboards/ID
    experiment: str
    run_name: str
    store: str  # projects/P/locations/R/metadataStores/default
    run_id: str  # the experiment run's context id
    histories: dict[str, History]

    @property
    def tensorboard_experiment(self) -> str:
        return f"{self.tensorboard}/experiments/{self.experiment}"

    @property
    def tensorboard_run(self) -> str:
        return f"{self.tensorboard_experiment}/runs/{self.run_name}"

    @property
    def artifact_id(self) -> str:
        return f"{self.run_id}{TENSORBOARD_RUN_ARTIFACT_SUFFIX}"


def _service(method: str, request: Any) -> ApiCall:
    return ApiCall(f"TensorboardService.{method}", request)


def create_tensorboard_experiment_call(run: TimeSeriesRun) -> ApiCall:
    """The experiment's TensorboardExperiment (ALREADY_EXISTS after its first run: fine)."""
    experiment = gca.TensorboardExperiment(display_name=run.experiment, labels=EXPERIMENT_LABELS)
    request = gca.CreateTensorboardExperimentRequest(
        parent=run.tensorboard,
        tensorboard_experiment=experiment,
        tensorboard_experiment_id=run.experiment,
    )
    return _service("CreateTensorboardExperiment", request)


def create_tensorboard_run_call(run: TimeSeriesRun) -> ApiCall:
    """The run's TensorboardRun (ALREADY_EXISTS when the handler is retried: fine)."""
    request = gca.CreateTensorboardRunRequest(
        parent=run.tensorboard_experiment,
        tensorboard_run=gca.TensorboardRun(display_name=run.run_name),
        tensorboard_run_id=run.run_name,
    )
    return _service("CreateTensorboardRun", request)


def list_time_series_call(run: TimeSeriesRun) -> ApiCall:
    """The run's series made before (a retried handler), to write into rather than add."""
    request = gca.ListTensorboardTimeSeriesRequest(parent=run.tensorboard_run)
    return _service("ListTensorboardTimeSeries", request)


def create_time_series_call(run: TimeSeriesRun, name: str) -> ApiCall:
    """One scalar series, named as the MLflow history."""
    series = gca.TensorboardTimeSeries(
        display_name=name,
        value_type=gca.TensorboardTimeSeries.ValueType.SCALAR,
        plugin_name=SCALARS_PLUGIN,
    )
    request = gca.CreateTensorboardTimeSeriesRequest(
        parent=run.tensorboard_run, tensorboard_time_series=series
    )
    return _service("CreateTensorboardTimeSeries", request)


def write_calls(run: TimeSeriesRun, series_ids: dict[str, str], wall_time: float) -> list[ApiCall]:
    """WriteTensorboardRunData of every point, at most MAX_POINTS_PER_WRITE a request."""
    stamp = _timestamp(wall_time)
    points = [
        (name, step, value)
        for name, history in sorted(run.histories.items())
        for step, value in history
    ]
    calls = []
    for start in range(0, len(points), MAX_POINTS_PER_WRITE):
        by_series: dict[str, list] = {}
        for name, step, value in points[start : start + MAX_POINTS_PER_WRITE]:
            point = gca.TimeSeriesDataPoint(
                step=step, wall_time=stamp, scalar=gca.Scalar(value=value)
            )
            by_series.setdefault(name, []).append(point)
        data = [
            gca.TimeSeriesData(
                tensorboard_time_series_id=series_ids[name],
                value_type=gca.TensorboardTimeSeries.ValueType.SCALAR,
                values=values,
            )
            for name, values in by_series.items()
        ]
        request = gca.WriteTensorboardRunDataRequest(
            tensorboard_run=run.tensorboard_run, time_series_data=data
        )
        calls.append(_service("WriteTensorboardRunData", request))
    return calls


def _timestamp(seconds: float):
    from google.protobuf import timestamp_pb2

    stamp = timestamp_pb2.Timestamp()
    stamp.FromNanoseconds(int(seconds * 1e9))
    return stamp


def create_run_artifact_call(run: TimeSeriesRun, region: str) -> ApiCall:
    """The Artifact through which Experiments finds the run's TensorboardRun."""
    artifact = gca.Artifact(
        uri=f"https://{api_host(region)}/v1/{run.tensorboard_run}",
        schema_title=TENSORBOARD_RUN_SCHEMA,
        schema_version=TENSORBOARD_RUN_SCHEMA_VERSION,
        metadata={RESOURCE_NAME_KEY: run.tensorboard_run, TRACKING_LABEL: True},
        state=gca.Artifact.State.LIVE,
    )
    request = gca.CreateArtifactRequest(
        parent=run.store, artifact=artifact, artifact_id=run.artifact_id
    )
    return ApiCall("MetadataService.CreateArtifact", request)


def link_run_artifact_call(run: TimeSeriesRun) -> ApiCall:
    """AddContextArtifactsAndExecutions: the Artifact joins the experiment run."""
    request = gca.AddContextArtifactsAndExecutionsRequest(
        context=f"{run.store}/contexts/{run.run_id}",
        artifacts=[f"{run.store}/artifacts/{run.artifact_id}"],
    )
    return ApiCall("MetadataService.AddContextArtifactsAndExecutions", request)


def _tolerating_exists(send: Send, call: ApiCall) -> Any:
    try:
        return send(call)
    except api_exceptions.AlreadyExists:
        return None


def _series_of(listed: Any) -> Iterator[Any]:
    """The series a ListTensorboardTimeSeries answer holds: every page of the client's pager,
    or the one response a recorded transport gives."""
    if listed is None:
        return iter(())
    if hasattr(listed, "pages"):
        return iter(listed)
    return iter(listed.tensorboard_time_series)


def log_time_series(
    run: TimeSeriesRun, region: str, send: Send, clock: Callable[[], float] = time.time
) -> list[ApiCall]:
    """Sends the run's histories as time series of its TensorboardRun and links that run to
    the experiment run (whose context exists already); returns the calls sent, in order.

    Raises:
      Whatever `send` raises but ALREADY_EXISTS, which is expected on reruns.
    """
    if not run.histories:
        return []
    sent: list[ApiCall] = []

    def call(made: ApiCall) -> Any:
        sent.append(made)
        return _tolerating_exists(send, made)

    call(create_tensorboard_experiment_call(run))
    call(create_tensorboard_run_call(run))
    listed = call(list_time_series_call(run))
    ids = {series.display_name: series.name.rsplit("/", 1)[1] for series in _series_of(listed)}
    for name in sorted(set(run.histories) - set(ids)):
        created = call(create_time_series_call(run, name))
        ids[name] = created.name.rsplit("/", 1)[1]
    for write in write_calls(run, ids, clock()):
        call(write)
    call(create_run_artifact_call(run, region))
    call(link_run_artifact_call(run))
    return sent
