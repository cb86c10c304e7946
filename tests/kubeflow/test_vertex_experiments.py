"""On Vertex AI the exit handler logs each run to Vertex AI Experiments, compiled and run offline.

The handler runs as its container does, against a job read back as GetPipelineJob
returns it (real TFMA output behind the Evaluator's artifacts, as in
test_exit_handler.py); its calls go to a transport that records them instead of
sending. The recorded requests are the SDK's own request objects, and the run they
create is read back through the SDK's own ExperimentRun.
"""

from __future__ import annotations

import json

import pytest
from google.api_core import exceptions as api_exceptions
from google.auth.credentials import AnonymousCredentials

import tpu_pipeline.kubeflow.exit_handler
from tests.kubeflow.conftest import DEPLOYMENT_CONFIGS, task_parameter
from tests.kubeflow.test_exit_handler import (
    JOB,
    PUSHED_TO,
    _predictions,
    evaluated_job,
    final_status,
)
from tests.pipeline.tfma_results import NAMES, write_evaluation
from tpu_pipeline.common import vertex_types as gca
from tpu_pipeline.common.config import EvaluatorConfig
from tpu_pipeline.kubeflow import vertex_experiments
from tpu_pipeline.kubeflow.exit_handler import RunEnded

EXPERIMENT = "digits-runs"
JOB_ID = JOB.rsplit("/", 1)[1]
STORE = "projects/123/locations/us-central1/metadataStores/default"


@pytest.fixture
def recorded(monkeypatch):
    """Every Vertex AI call the handler sends, recorded instead of sent; `fail` makes one fail."""
    calls: list = []
    failures: dict[str, Exception] = {}

    def send(call, region, credentials):
        calls.append((call, region))
        key = f"{call.method}:{getattr(call.request, 'context_id', '')}"
        if key in failures:
            raise failures[key]
        return None

    monkeypatch.setattr(
        tpu_pipeline.kubeflow.exit_handler, "connect", lambda region: AnonymousCredentials()
    )
    monkeypatch.setattr(tpu_pipeline.kubeflow.exit_handler, "vertex_api_send", send)
    return calls, failures


def run_handler(status: str, found, config, monkeypatch, experiment: str = EXPERIMENT) -> None:
    """The exit handler's executor as its container runs it, the job read from `found`."""
    monkeypatch.setattr(
        tpu_pipeline.kubeflow.exit_handler, "read_pipeline_job", {JOB: found}.__getitem__
    )
    RunEnded.EXECUTOR_SPEC.executor_class().Do(
        {},
        {},
        {
            "final_status": status,
            "webhook_secret": "",
            "timeout_seconds": 5.0,
            "pipeline_name": config.full_pipeline_name,
            "class_names": json.dumps(list(NAMES)),  # the classes of the TFMA output
            "evaluator_config": EvaluatorConfig().model_dump_json(),
            "drift_config": "",
            "experiment": experiment,
            "run_config": config.model_dump_json(),
            "experiment_budget_seconds": 10.0,
        },
    )


@pytest.fixture(scope="module")
def evaluation(tmp_path_factory) -> str:
    """TFMA's output for a model right on 97 of 100 examples: blessed under the 0.9 bound."""
    return write_evaluation(str(tmp_path_factory.mktemp("evaluation")), *_predictions())


@pytest.fixture(scope="module")
def vertex_config():
    from tpu_pipeline.common.config import load_config

    return load_config(str(DEPLOYMENT_CONFIGS["cpu"]), {"tracking.vertex_experiment": EXPERIMENT})


def test_the_names_and_keys_are_the_sdks_own():
    from google.cloud.aiplatform.metadata import constants, experiment_run_resource

    assert vertex_experiments.EXPERIMENT_SCHEMA == constants.SYSTEM_EXPERIMENT
    assert vertex_experiments.EXPERIMENT_RUN_SCHEMA == constants.SYSTEM_EXPERIMENT_RUN
    assert (
        vertex_experiments.SCHEMA_VERSION == constants.SCHEMA_VERSIONS[constants.SYSTEM_EXPERIMENT]
    )
    assert (
        vertex_experiments.SCHEMA_VERSION
        == (constants.SCHEMA_VERSIONS[constants.SYSTEM_EXPERIMENT_RUN])
    )
    assert vertex_experiments.EXPERIMENT_METADATA == constants.EXPERIMENT_METADATA
    assert (vertex_experiments.PARAMS_KEY, vertex_experiments.METRICS_KEY) == (
        constants._PARAM_KEY,
        constants._METRIC_KEY,
    )
    assert vertex_experiments.STATE_KEY == constants._STATE_KEY
    assert experiment_run_resource._format_experiment_run_resource_id(EXPERIMENT, JOB_ID) == (
        f"{EXPERIMENT}-{JOB_ID}"
    )


def test_a_finished_run_becomes_an_experiment_run_with_its_config_and_metrics(
    evaluation,
    vertex_config,
    recorded,
    monkeypatch,
    caplog,
):
    calls, _ = recorded
    found = evaluated_job(evaluation, pushed=1.0, pushed_destination=PUSHED_TO, already_pushed=0.0)
    run_handler(final_status("SUCCEEDED"), found, vertex_config, monkeypatch)

    assert [(call.method, region) for call, region in calls] == [
        ("MetadataService.CreateContext", "us-central1"),
        ("MetadataService.CreateContext", "us-central1"),
        ("MetadataService.AddContextChildren", "us-central1"),
    ]
    experiment, run, link = (call.request for call, _ in calls)
    assert isinstance(experiment, gca.CreateContextRequest)
    assert (experiment.parent, experiment.context_id) == (STORE, EXPERIMENT)
    assert experiment.context.schema_title == "system.Experiment"
    assert (run.parent, run.context_id) == (STORE, f"{EXPERIMENT}-{JOB_ID}")
    assert run.context.display_name == JOB_ID
    assert link.context == f"{STORE}/contexts/{EXPERIMENT}"
    assert list(link.child_contexts) == [f"{STORE}/contexts/{EXPERIMENT}-{JOB_ID}"]

    # Read back as the SDK reads an experiment run: what aiplatform's get_params/get_metrics say.
    from google.cloud.aiplatform.metadata import context, experiment_run_resource

    created = gca.Context(run.context)
    created.name = f"{STORE}/contexts/{run.context_id}"
    node = context.Context._construct_sdk_resource_from_gapic(
        created, project="123", location="us-central1", credentials=AnonymousCredentials()
    )
    sdk_run = experiment_run_resource.ExperimentRun.__new__(experiment_run_resource.ExperimentRun)
    sdk_run._metadata_node = node
    params, metrics = sdk_run.get_params(), sdk_run.get_metrics()
    assert sdk_run.get_state() == "COMPLETE"
    assert params["trainer.epochs"] == str(vertex_config.trainer.epochs)
    assert params["dataset"] == "digits" and params["outcome"] == "blessed and pushed"
    assert params["pushed_model"] == PUSHED_TO
    assert params["tracking.vertex_experiment"] == EXPERIMENT
    assert metrics["eval.accuracy"] == pytest.approx(0.97)
    assert metrics["blessed"] == 1.0
    assert metrics["eval.class.circle.recall"] == pytest.approx(1.0)  # never mistaken
    assert metrics["eval.class.heart.recall"] < 1.0
    assert "eval.slice.class.circle.accuracy" in metrics
    assert "eval.calibration_error" in metrics
    assert not [r for r in caplog.records if r.getMessage().endswith("result stands")]


def test_a_rerun_handler_updates_the_run_it_made_and_an_existing_experiment_is_fine(
    evaluation,
    vertex_config,
    recorded,
    monkeypatch,
):
    calls, failures = recorded
    failures["MetadataService.CreateContext:" + EXPERIMENT] = api_exceptions.AlreadyExists("x")
    failures[f"MetadataService.CreateContext:{EXPERIMENT}-{JOB_ID}"] = api_exceptions.AlreadyExists(
        "y"
    )
    found = evaluated_job(evaluation, blessed=0.0, pushed=0.0)
    run_handler(final_status("SUCCEEDED"), found, vertex_config, monkeypatch)

    methods = [call.method.split(".")[1] for call, _ in calls]
    assert methods == ["CreateContext", "CreateContext", "UpdateContext", "AddContextChildren"]
    update = calls[2][0].request
    assert update.context.name == f"{STORE}/contexts/{EXPERIMENT}-{JOB_ID}"
    assert update.context.metadata["_params"]["outcome"] == "not blessed"


def test_a_failed_run_is_logged_failed_and_a_job_that_cannot_be_read_says_why(
    vertex_config, recorded, monkeypatch
):
    calls, _ = recorded
    monkeypatch.setattr(tpu_pipeline.kubeflow.exit_handler, "read_pipeline_job", _unreadable)
    RunEnded.EXECUTOR_SPEC.executor_class().Do(
        {},
        {},
        {
            "final_status": final_status("FAILED", "The failed tasks are: [Trainer]."),
            "webhook_secret": "",
            "timeout_seconds": 5.0,
            "pipeline_name": vertex_config.full_pipeline_name,
            "class_names": "[]",
            "evaluator_config": EvaluatorConfig().model_dump_json(),
            "drift_config": "",
            "experiment": EXPERIMENT,
            "run_config": vertex_config.model_dump_json(),
            "experiment_budget_seconds": 10.0,
        },
    )
    run = calls[1][0].request.context
    assert run.metadata["_state"] == "FAILED"
    assert run.metadata["_params"]["results_not_read"] == "PermissionDenied: 403 no access"
    assert dict(run.metadata["_metrics"]) == {}


def _unreadable(name):
    raise api_exceptions.PermissionDenied("no access")


def test_an_api_that_refuses_is_one_warning_and_a_succeeding_step(
    evaluation,
    vertex_config,
    recorded,
    monkeypatch,
    caplog,
):
    _, failures = recorded
    failures["MetadataService.CreateContext:" + EXPERIMENT] = api_exceptions.PermissionDenied(
        "aiplatform.metadataStores.contexts.create denied"
    )
    found = evaluated_job(evaluation, pushed=1.0, pushed_destination=PUSHED_TO)
    run_handler(final_status("SUCCEEDED"), found, vertex_config, monkeypatch)  # no exception
    (warning,) = [r.getMessage() for r in caplog.records if r.getMessage().endswith("stands")]
    assert warning == (
        f"the run was not logged to Vertex AI Experiments {EXPERIMENT}: PermissionDenied: 403 "
        "aiplatform.metadataStores.contexts.create denied; the run's result stands"
    )


def test_the_compiled_spec_carries_the_experiment_and_the_config_as_compiled(compile_spec):
    config, spec, _ = compile_spec("cpu", **{"tracking.vertex_experiment": EXPERIMENT})
    tasks = spec["pipelineSpec"]["root"]["dag"]["tasks"]
    assert set(tasks) == {"tfx-dag", "RunEnded"}  # no webhook, yet a handler: to log the run
    assert task_parameter(spec, "RunEnded", "experiment") == EXPERIMENT
    assert task_parameter(spec, "RunEnded", "webhook_secret") == ""
    compiled = task_parameter(spec, "RunEnded", "run_config")
    assert compiled["tracking"]["vertex_experiment"] == EXPERIMENT
    # The configuration as the cluster runs it: the data on Cloud Storage, not a local folder.
    assert compiled["dataset"]["data_dir"] == config.vertex.data_root
    budget = tasks["RunEnded"]["inputs"]["parameters"]["experiment_budget_seconds"]
    assert budget == {"runtimeValue": {"constantValue": {"doubleValue": 300.0}}}


def test_an_experiment_name_vertex_refuses_never_compiles():
    from tpu_pipeline.common.config import ConfigError, load_config

    with pytest.raises(ConfigError, match="tracking.vertex_experiment"):
        load_config(str(DEPLOYMENT_CONFIGS["cpu"]), {"tracking.vertex_experiment": "Digits Runs"})
