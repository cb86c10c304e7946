"""Sends a `TrackedRun` to MLflow through MLflow's own client, failing fast.

Left to itself MLflow's client retries a request seven times with backoff and waits up
to 120 s for each answer: minutes against a tracker that is down. Its documented
environment variables bound it here, for the duration of the logging only: no retry,
and `tracking.timeout_seconds` per request. MLflow's own log lines are silenced
meanwhile (the caller reports a failure in one line of its own), and so are the run URL
it prints on stdout when a run ends and its upload progress bars.

A pushed version is uploaded into the run (`model/`) and registered from there
(`runs:/<run id>/model`): MLflow 3's server refuses a model version whose source is a
local path outside the run's artifacts, such as the serving folder. The version's tags
name the served folder it is a copy of, and the registered model's `serving` alias
moves to it (pipeline/tracking/serving_log.py moves it when a person changes what serves).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from tpu_pipeline.common.work_dirs import WorkDirs
from tpu_pipeline.pipeline.tracking.record import MODEL_ARTIFACT, TrackedRun

if TYPE_CHECKING:
    from tpu_pipeline.common.config import TrackingConfig

SUMMARY_ARTIFACT = "summary.json"
# Where the summary is written for MLflow to upload as the run's artifact.
SUMMARY_COPIES = WorkDirs("tracking", "summary for the tracker")
SOURCE_NAME = "tpu-pipeline run"
# The registered model's alias for the version served now, and the tags naming each
# version's folder in the serving folder and whether it serves.
SERVING_ALIAS = "serving"
SERVING_VERSION_TAG = "serving_version"
SERVING_STATE_TAG = "serving_state"
SERVING = "serving"


@dataclasses.dataclass(frozen=True)
class Logged:
    """Where the run went: its MLflow run id and page, and the model version registered."""

    run_id: str
    run_url: str | None
    registered: str | None  # "name version N"
    source: str | None  # the registered version's source

    def lines(self) -> list[str]:
        """The result lines `tpu-pipeline run` prints."""
        where = f" ({self.run_url})" if self.run_url else ""
        lines = [f"tracked: MLflow run {self.run_id}{where}"]
        if self.registered:
            lines.append(f"registered: {self.registered} from {self.source}")
        return lines


@contextlib.contextmanager
def bounded_requests(timeout_seconds: float) -> Iterator[None]:
    """MLflow's client without retries, each request bounded, and silent; restored after."""
    settings = {
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
        "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "0",
        "MLFLOW_HTTP_REQUEST_TIMEOUT": str(max(1, math.ceil(timeout_seconds))),
        "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
        "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
    }
    saved = {name: os.environ.get(name) for name in settings}
    loggers = [logging.getLogger(name) for name in ("mlflow", "urllib3", "alembic")]
    disabled = [logger.disabled for logger in loggers]
    os.environ.update(settings)
    for logger in loggers:
        logger.disabled = True
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        for logger, was in zip(loggers, disabled, strict=True):
            logger.disabled = was


def run_url(uri: str, experiment_id: str, run_id: str) -> str | None:
    """The run's page in the MLflow UI, for a tracking server (never with user info)."""
    if not uri.lower().startswith(("http://", "https://")):
        return None
    from tpu_pipeline.common.config import url_host

    scheme = uri.split(":", 1)[0].lower()
    path = uri.split("://", 1)[1].partition("/")[2].split("?")[0].rstrip("/")
    base = f"{scheme}://{url_host(uri)}" + (f"/{path}" if path else "")
    return f"{base}/#/experiments/{experiment_id}/runs/{run_id}"


def log_to_mlflow(tracked: TrackedRun, uri: str, tracking: TrackingConfig, pipeline: str) -> Logged:
    """Logs `tracked` as a new run of the experiment `tracking` names, and registers its
    pushed version; returns where it went.

    Raises:
      Whatever MLflow raises: the tracker is down, refuses, or answers too slowly.
    """
    with mlflow_client(uri, tracking) as client:
        return _log(client, tracked, uri, tracking, pipeline)


@contextlib.contextmanager
def mlflow_client(uri: str, tracking: TrackingConfig) -> Iterator:
    """MLflow's client for `uri` (tracking and registry), its requests bounded meanwhile."""
    with bounded_requests(tracking.timeout_seconds):
        from mlflow import MlflowClient

        yield MlflowClient(tracking_uri=uri, registry_uri=uri)


def _log(client, tracked: TrackedRun, uri: str, tracking: TrackingConfig, pipeline: str) -> Logged:
    from mlflow.entities import Metric, Param, RunStatus

    name = tracking.experiment_for(pipeline)
    experiment = client.get_experiment_by_name(name)  # a tracker that is down fails here
    experiment_id = experiment.experiment_id if experiment else client.create_experiment(name)
    tags = {
        **tracked.tags,
        "mlflow.note.content": tracked.description,
        "mlflow.source.name": SOURCE_NAME,
        "mlflow.source.type": "LOCAL",
    }
    run_id = client.create_run(experiment_id, run_name=tracked.name, tags=tags).info.run_id
    succeeded = tracked.metrics.get("succeeded") == 1.0
    try:
        now = int(time.time() * 1000)
        metrics = [Metric(key, value, now, 0) for key, value in tracked.metrics.items()]
        metrics += [
            Metric(key, value, now, step)
            for key, points in tracked.histories.items()
            for step, value in points
        ]
        params = [Param(key, value) for key, value in tracked.params.items()]
        client.log_batch(run_id, metrics=metrics, params=params)
        for path, folder in tracked.artifacts:
            client.log_artifact(run_id, path, folder)
        with SUMMARY_COPIES.owned() as scratch:
            summary = scratch / SUMMARY_ARTIFACT
            summary.write_text(tracked.summary_json)
            client.log_artifact(run_id, str(summary))
        registered = source = None
        if tracked.pushed is not None:
            client.log_artifacts(run_id, tracked.pushed.folder, MODEL_ARTIFACT)
            registered, source = _register(client, tracked, run_id, tracking, pipeline)
        status = RunStatus.FINISHED if succeeded else RunStatus.FAILED
        client.set_terminated(run_id, RunStatus.to_string(status))
    except BaseException:
        with contextlib.suppress(Exception):  # the tracker may be the thing that failed
            client.set_terminated(run_id, RunStatus.to_string(RunStatus.FAILED))
        raise
    return Logged(run_id, run_url(uri, experiment_id, run_id), registered, source)


def _register(
    client, tracked: TrackedRun, run_id: str, tracking: TrackingConfig, pipeline: str
) -> tuple[str, str]:
    """Registers the run's copy of the pushed version; returns ("name version N", source)."""
    name = registered_model(client, tracking, pipeline)
    pushed = tracked.pushed
    data = {k: v for k, v in tracked.tags.items() if k in ("dataset", "spans", "git_commit")}
    version, source = register_version(
        client,
        name,
        run_id,
        pushed.folder,
        pushed.version,
        data,
        f"Serving version {pushed.version}, pushed to {pushed.folder}",
    )
    return f"{name} version {version.version}", source


def registered_model(client, tracking: TrackingConfig, pipeline: str) -> str:
    """The registered model the pipeline's versions go to, created if new; its name."""
    from mlflow.exceptions import MlflowException
    from mlflow.protos.databricks_pb2 import RESOURCE_ALREADY_EXISTS, ErrorCode

    name = tracking.registered_model or pipeline
    try:
        client.create_registered_model(name, description=f"Versions pushed by {pipeline} runs")
    except MlflowException as error:
        if error.error_code != ErrorCode.Name(RESOURCE_ALREADY_EXISTS):
            raise
    return name


def register_version(
    client,
    name: str,
    run_id: str,
    served_folder: str,
    serving_version: str,
    tags: dict[str, str],
    description: str,
):
    """Registers the copy of a served version that run `run_id` logged (`model/`), makes it
    the registered model's `serving` alias (it serves now) and tags it with its served
    folder and name; returns (the ModelVersion, its source)."""
    source = f"runs:/{run_id}/{MODEL_ARTIFACT}"
    version = client.create_model_version(
        name,
        source,
        run_id=run_id,
        tags={
            "served_folder": served_folder,
            SERVING_VERSION_TAG: serving_version,
            SERVING_STATE_TAG: SERVING,
            **tags,
        },
        description=description,
        await_creation_for=0,
    )
    client.set_registered_model_alias(name, SERVING_ALIAS, version.version)
    client.set_tag(run_id, "registered_model_version", f"{name}/{version.version}")
    return version, source
