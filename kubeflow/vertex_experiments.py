"""A Vertex AI run, logged to Vertex AI Experiments by the pipeline's exit handler.

Vertex AI Experiments keeps its experiments in the region's Vertex ML Metadata store,
as the SDK's `aiplatform.start_run`, `log_params` and `log_metrics` write them: an
experiment is a Context of schema `system.Experiment` (its id is its name), a run a
Context of schema `system.ExperimentRun` whose id is `<experiment>-<run>` and whose
metadata holds `_params`, `_metrics` and `_state`, made a child of the experiment.
The requests here are the SDK's own request types, built offline with the SDK's own
schema names and keys (`google.cloud.aiplatform.metadata.constants`), printed by a dry
run exactly as sent; each is sent once, with a deadline (`vertex_api.send`): the SDK's
high-level calls retry an unreachable API for about two minutes.

The run is named after the pipeline job, so a retried exit handler updates the run
it created instead of adding a second one. Its params are the resolved configuration
and what the local tracker tags (pipeline/tracking/record.py: one list for both
trackers); its metrics the run summary's final figures. With `tracking.vertex_tensorboard`
its per-epoch histories follow as time series (kubeflow/vertex_time_series.py); without a
TensorBoard instance Experiments has nowhere to keep them, and this creates none (an
instance is billed for the storage it holds).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from google.api_core import exceptions as api_exceptions

from tpu_pipeline.common import vertex_types as gca
from tpu_pipeline.common.config import PipelineConfig
from tpu_pipeline.kubeflow.vertex_requests import ApiCall
from tpu_pipeline.kubeflow.vertex_time_series import (
    BACKING_TENSORBOARD_KEY,
    History,
    TimeSeriesRun,
    log_time_series,
)
from tpu_pipeline.pipeline.results.run_outcome import run_outcome
from tpu_pipeline.pipeline.tracking.record import metrics_of, params_of
from tpu_pipeline.serving_ops.vertex.baseline import metadata_call, store_in

if TYPE_CHECKING:
    from tpu_pipeline.pipeline.results.run_summary import RunSummary

# The SDK's names (google/cloud/aiplatform/metadata/constants.py), checked against it by
# tests/kubeflow/test_vertex_experiments.py: importing the SDK here costs seconds.
EXPERIMENT_SCHEMA = "system.Experiment"
EXPERIMENT_RUN_SCHEMA = "system.ExperimentRun"
SCHEMA_VERSION = "0.0.1"
EXPERIMENT_METADATA = {"experiment_deleted": False}
PARAMS_KEY, METRICS_KEY, STATE_KEY = "_params", "_metrics", "_state"
# The SDK's rule for a run's resource id, `<experiment>-<run>` (ExperimentRun._validate_run_id):
# short enough for its TensorBoard run's Artifact id (`<run id>-tb-run`) to fit in 128.
MAX_RUN_ID = 121
# A run's state, as the SDK records it: an Execution.State name.
STATES = {"SUCCEEDED": "COMPLETE", "FAILED": "FAILED", "CANCELLED": "CANCELLED"}

Send = Callable[[ApiCall], Any]


@dataclasses.dataclass(frozen=True)
class ExperimentRun:
    """Where a run goes: the experiment's and the run's context names, and what they hold."""

    store: str  # projects/P/locations/R/metadataStores/default
    experiment: str
    run_name: str
    params: dict[str, Any]
    metrics: dict[str, float]
    state: str
    tensorboard: str | None = None
    histories: dict[str, History] = dataclasses.field(default_factory=dict)

    @property
    def run_id(self) -> str:
        return f"{self.experiment}-{self.run_name}"[:MAX_RUN_ID].rstrip("-")

    @property
    def experiment_context(self) -> str:
        return f"{self.store}/contexts/{self.experiment}"

    @property
    def run_context(self) -> str:
        return f"{self.store}/contexts/{self.run_id}"

    @property
    def region(self) -> str:
        return self.store.split("/")[3]

    def time_series(self) -> TimeSeriesRun | None:
        """Where its histories go as time series; None without a TensorBoard or histories."""
        if self.tensorboard is None or not self.histories:
            return None
        return TimeSeriesRun(
            self.tensorboard,
            self.experiment,
            self.run_name,
            self.store,
            self.run_id,
            self.histories,
        )


def experiment_params(config: PipelineConfig, summary: RunSummary | None) -> dict[str, Any]:
    """The run's params: the resolved configuration, the defaults chosen from the data and how
    it trained (as the MLflow run's params), with how it ended."""
    if summary is None:
        from tpu_pipeline.pipeline.results.run_summary import RunSummary

        summary = RunSummary.without_results(config.full_pipeline_name, [], None, None)
    params: dict[str, Any] = params_of(config, summary)
    params["dataset"] = config.dataset.name
    params["outcome"] = run_outcome(summary)
    params["blessing_reason"] = summary.blessing_reason
    params["push"] = summary.push_note
    if summary.pushed_model:
        params["pushed_model"] = summary.pushed_model
    return params


def experiment_run(
    location: str,
    experiment: str,
    job_id: str,
    config: PipelineConfig,
    summary: RunSummary | None,
    dag_state: str,
    unread: str = "",
    histories: dict[str, History] | None = None,
    histories_unread: str = "",
) -> ExperimentRun:
    """The experiment run of the pipeline job `job_id` (in `projects/P/locations/R`).

    `summary` is None when the job's results could not be read (`unread` says why): the
    run then holds its params and final state, and why there are no metrics. `histories`
    are the Trainer's per-epoch series, sent when `tracking.vertex_tensorboard` is set
    (`histories_unread`: why they could not be read).
    """
    params = experiment_params(config, summary)
    if unread:
        params["results_not_read"] = unread
    if histories_unread:
        params["histories_not_read"] = histories_unread
    return ExperimentRun(
        store=store_in(location),
        experiment=experiment,
        run_name=job_id,
        params=params,
        metrics=metrics_of(summary) if summary is not None else {},
        state=STATES.get(dag_state, "STATE_UNSPECIFIED"),
        tensorboard=config.tracking.vertex_tensorboard,
        histories=histories or {},
    )


def _run_context(run: ExperimentRun) -> gca.Context:
    return gca.Context(
        name=run.run_context,
        display_name=run.run_name,
        schema_title=EXPERIMENT_RUN_SCHEMA,
        schema_version=SCHEMA_VERSION,
        metadata={PARAMS_KEY: run.params, METRICS_KEY: run.metrics, STATE_KEY: run.state},
    )


def experiment_metadata(run: ExperimentRun) -> dict[str, Any]:
    """A new experiment's metadata, naming its TensorBoard as `aiplatform.init` does."""
    if run.tensorboard is None:
        return EXPERIMENT_METADATA
    return {**EXPERIMENT_METADATA, BACKING_TENSORBOARD_KEY: run.tensorboard}


def create_experiment_call(run: ExperimentRun) -> ApiCall:
    """CreateContext of the experiment (ALREADY_EXISTS after its first run: fine)."""
    context = gca.Context(
        display_name=run.experiment,
        schema_title=EXPERIMENT_SCHEMA,
        schema_version=SCHEMA_VERSION,
        metadata=experiment_metadata(run),
    )
    request = gca.CreateContextRequest(parent=run.store, context=context, context_id=run.experiment)
    return metadata_call("CreateContext", request)


def create_run_call(run: ExperimentRun) -> ApiCall:
    """CreateContext of the run, params, metrics and state in one."""
    context = _run_context(run)
    context.name = ""  # the service names it from context_id
    request = gca.CreateContextRequest(parent=run.store, context=context, context_id=run.run_id)
    return metadata_call("CreateContext", request)


def update_run_call(run: ExperimentRun) -> ApiCall:
    """UpdateContext of a run created before (the exit handler retried): its metadata anew."""
    request = gca.UpdateContextRequest(context=_run_context(run), allow_missing=False)
    return metadata_call("UpdateContext", request)


def add_run_call(run: ExperimentRun) -> ApiCall:
    """AddContextChildren: the run joins the experiment."""
    request = gca.AddContextChildrenRequest(
        context=run.experiment_context, child_contexts=[run.run_context]
    )
    return metadata_call("AddContextChildren", request)


def log_experiment_run(run: ExperimentRun, send: Send) -> list[ApiCall]:
    """Creates the experiment (if new) and the run (or updates it) and links them, then sends
    its histories as time series when it has a TensorBoard; returns the calls sent, in order.

    Raises:
      Whatever `send` raises but ALREADY_EXISTS, which is expected on reruns.
    """
    sent = []
    for call, on_exists in (
        (create_experiment_call(run), None),
        (create_run_call(run), update_run_call(run)),
        (add_run_call(run), None),
    ):
        sent.append(call)
        try:
            send(call)
        except api_exceptions.AlreadyExists:
            if on_exists is not None:
                sent.append(on_exists)
                send(on_exists)
    series = run.time_series()
    if series is not None:
        sent += log_time_series(series, run.region, send)
    return sent
