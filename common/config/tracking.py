"""The `tracking:` section: the experiment trackers each run is recorded in, besides ML Metadata.

ML Metadata stays the record the pipeline itself runs on (cache, baseline, `runs`); a
tracker is where people already look. A local run logs to MLflow when this section or
MLflow's own environment variable (`MLFLOW_TRACKING_URI`) names a tracking server; a
Vertex AI run logs to Vertex AI Experiments when `vertex_experiment` is set. A tracker
that is down or refuses costs one warning line, never the run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import Field

from tpu_pipeline.common.config.base import _Section

# MLflow's own environment variables (mlflow/environment_variables.py), honoured when the
# section leaves the field unset, as every MLflow client does.
MLFLOW_TRACKING_URI_ENV = "MLFLOW_TRACKING_URI"
MLFLOW_EXPERIMENT_NAME_ENV = "MLFLOW_EXPERIMENT_NAME"
# Vertex AI's rule for an experiment's name (and so its Metadata context id).
VERTEX_EXPERIMENT_PATTERN = r"^[a-z0-9][a-z0-9-]{0,62}$"
# A Vertex AI TensorBoard instance's resource name.
VERTEX_TENSORBOARD_PATTERN = r"^projects/[^/]+/locations/[^/]+/tensorboards/[^/]+$"


class TrackingConfig(_Section):
    """Where each run is logged: params, metric histories, artifacts and pushed versions.

    The configuration is logged through its own dump, so a secret field (a webhook URL)
    shows its host only there too; a tracking URI holding a `user:password@` is refused
    like any other plain credential (give MLflow's MLFLOW_TRACKING_USERNAME and
    MLFLOW_TRACKING_PASSWORD, or MLFLOW_TRACKING_TOKEN, in the environment instead).
    """

    mlflow_tracking_uri: str | None = Field(
        default=None,
        min_length=1,
        description="MLflow tracking server each local run logs to (http://host:port, or a "
        "store MLflow opens itself: sqlite:///FILE, file:FOLDER); unset: $MLFLOW_TRACKING_URI, "
        "and no MLflow logging when that is unset too",
    )
    mlflow_experiment: str | None = Field(
        default=None,
        min_length=1,
        description="MLflow experiment the runs go to; unset: $MLFLOW_EXPERIMENT_NAME, else the "
        "pipeline's full name (tpu-pipeline-digits)",
    )
    registered_model: str | None = Field(
        default=None,
        min_length=1,
        description="MLflow registered model each newly pushed version becomes a version of "
        "(its source is the copy the run logged, runs:/<run id>/model); unset: the pipeline's "
        "full name",
    )
    register_pushed_versions: bool = Field(
        default=True,
        description="log each newly pushed version with the run and register it "
        "(false: no model is uploaded)",
    )
    timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        le=600,
        description="the longest one request to the tracker may take; a failed request is not "
        "retried, so a tracker that is down costs one such wait at most",
    )
    budget_seconds: float = Field(
        default=300.0,
        gt=0,
        le=3600,
        description="the longest logging one run may take in all, artifacts and model "
        "included; past it the run ends with a warning and the tracker keeps what arrived",
    )
    vertex_experiment: str | None = Field(
        default=None,
        pattern=VERTEX_EXPERIMENT_PATTERN,
        description="Vertex AI Experiments experiment a Vertex AI run logs to from its exit "
        "handler (lower-case letters, digits and dashes); unset: none",
    )
    vertex_tensorboard: str | None = Field(
        default=None,
        pattern=VERTEX_TENSORBOARD_PATTERN,
        description="Vertex AI TensorBoard instance behind vertex_experiment "
        "(projects/P/locations/REGION/tensorboards/ID, in the pipeline's project and region), "
        "where each run's per-epoch histories go as time series; unset: final metrics only",
    )

    def mlflow_uri(self, environ: Mapping[str, str] = os.environ) -> str | None:
        """The MLflow tracking URI a local run logs to: this section's, else MLflow's
        environment variable; None when neither is set."""
        return self.mlflow_tracking_uri or environ.get(MLFLOW_TRACKING_URI_ENV) or None

    def experiment_for(self, pipeline: str, environ: Mapping[str, str] = os.environ) -> str:
        """The MLflow experiment of the pipeline `pipeline` (its full name)."""
        return self.mlflow_experiment or environ.get(MLFLOW_EXPERIMENT_NAME_ENV) or pipeline
