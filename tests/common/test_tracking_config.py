"""The `tracking:` section: which tracker a run logs to, named by the file or by MLflow's own
environment variables, never holding a credential in plain text."""

from __future__ import annotations

import pytest

from tpu_pipeline.common.config import ConfigError, TrackingConfig, load_config
from tpu_pipeline.pipeline.wiring.input_fingerprint import config_digest


def test_nothing_is_tracked_unless_the_section_or_mlflows_variable_names_a_server():
    assert TrackingConfig().mlflow_uri({}) is None
    assert TrackingConfig().mlflow_uri({"MLFLOW_TRACKING_URI": "http://127.0.0.1:5000"}) == (
        "http://127.0.0.1:5000"
    )
    # The file is explicit, so it wins over the environment (as mlflow.set_tracking_uri does).
    named = TrackingConfig(mlflow_tracking_uri="http://mlflow.internal:80")
    assert named.mlflow_uri({"MLFLOW_TRACKING_URI": "http://other:5000"}) == (
        "http://mlflow.internal:80"
    )


def test_the_experiment_is_the_pipelines_name_unless_named():
    assert TrackingConfig().experiment_for("tpu-pipeline-digits", {}) == "tpu-pipeline-digits"
    environ = {"MLFLOW_EXPERIMENT_NAME": "team-digits"}
    assert TrackingConfig().experiment_for("tpu-pipeline-digits", environ) == "team-digits"
    named = TrackingConfig(mlflow_experiment="mine")
    assert named.experiment_for("tpu-pipeline-digits", environ) == "mine"


def test_a_tracking_uri_with_a_password_is_refused_naming_the_field_not_the_password():
    with pytest.raises(ConfigError) as error:
        load_config(
            None, {"tracking.mlflow_tracking_uri": "https://alice:s3cretpass@mlflow.example.com"}
        )
    assert "tracking.mlflow_tracking_uri: holds a URL with a user:password@" in str(error.value)
    assert "s3cretpass" not in str(error.value)


def test_a_vertex_experiment_name_vertex_would_refuse_is_a_config_error():
    with pytest.raises(ConfigError) as error:
        load_config(None, {"tracking.vertex_experiment": "Digits_Runs"})
    assert "tracking.vertex_experiment: String should match pattern" in str(error.value)
    assert load_config(None, {"tracking.vertex_experiment": "digits-runs"}).tracking == (
        TrackingConfig(vertex_experiment="digits-runs")
    )


def test_where_a_run_is_tracked_does_not_make_its_inputs_new():
    # `run --if-new-data` must not rerun because the tracker moved.
    tracked = load_config(None, {"tracking.mlflow_tracking_uri": "http://127.0.0.1:5000"})
    assert config_digest(tracked) == config_digest(load_config(None))
