"""On Vertex AI the exit handler logs each run to Vertex AI Experiments, compiled and run offline.

The handler runs as its container does, against a job read back as GetPipelineJob
returns it (real TFMA output behind the Evaluator's artifacts, as in
test_exit_handler.py, and real TensorBoard event files behind the Trainer's model_run);
its calls go to a transport that records them instead of sending, answering the
TensorboardService as the service does (`FakeTensorboard`). The recorded requests are
the SDK's own request objects, and the run they create is read back through the SDK's
own ExperimentRun.
"""

from __future__ import annotations

import json

import pytest
from google.api_core import exceptions as api_exceptions
from google.auth.credentials import AnonymousCredentials

import tpu_pipeline.kubeflow.exit_handler
from tests.kubeflow.conftest import DEPLOYMENT_CONFIGS, task_parameter
from tests.kubeflow.test_exit_handler import (
    DAG,
    JOB,
    PUSHED_TO,
    _predictions,
    evaluated_job,
    final_status,
    outputs,
)
from tests.pipeline.tfma_results import NAMES, write_evaluation
from tpu_pipeline.common import vertex_types as gca
from tpu_pipeline.common.config import EvaluatorConfig
from tpu_pipeline.kubeflow import vertex_experiments, vertex_time_series
from tpu_pipeline.kubeflow.exit_handler import RunEnded

EXPERIMENT = "digits-runs"
JOB_ID = JOB.rsplit("/", 1)[1]
STORE = "projects/123/locations/us-central1/metadataStores/default"
TENSORBOARD = "projects/123/locations/us-central1/tensorboards/456"
# What the Trainer's TensorBoard callback wrote, per epoch: split -> scalar -> values.
EPOCHS = {
    "train": {
        "loss": [1.9, 0.8, 0.4],
        "accuracy": [0.41, 0.77, 0.9],
        "learning_rate": [0.01, 0.005, 0.0025],
        "examples_per_second": [1200.0, 2400.0, 2500.0],
        "seconds": [3.1, 1.2, 1.1],
    },
    "validation": {"loss": [1.2, 0.6, 0.5], "accuracy": [0.6, 0.82, 0.88]},
}


class FakeTensorboard:
    """The TensorboardService and the artifacts of the metadata store, as the service answers:
    a created series gets a name, a second create of what exists is ALREADY_EXISTS, a list
    answers what was created."""

    def __init__(self):
        self.made: set[tuple[str, str]] = set()
        self.series: dict[str, dict[str, str]] = {}  # run -> display name -> resource name

    def __call__(self, call):
        method, request = call.method.split(".")[1], call.request
        if method in ("CreateTensorboardExperiment", "CreateTensorboardRun", "CreateArtifact"):
            made = (method, str(request))
            if made in self.made:
                raise api_exceptions.AlreadyExists(method)
            self.made.add(made)
        if method == "ListTensorboardTimeSeries":
            return gca.ListTensorboardTimeSeriesResponse(
                tensorboard_time_series=[
                    gca.TensorboardTimeSeries(name=name, display_name=shown)
                    for shown, name in self.series.get(request.parent, {}).items()
                ]
            )
        if method == "CreateTensorboardTimeSeries":
            made = self.series.setdefault(request.parent, {})
            name = f"{request.parent}/timeSeries/{700 + len(made)}"
            made[request.tensorboard_time_series.display_name] = name
            return gca.TensorboardTimeSeries(request.tensorboard_time_series, name=name)
        return None


@pytest.fixture
def recorded(monkeypatch):
    """Every Vertex AI call the handler sends, recorded instead of sent; `fail` makes one fail."""
    calls: list = []
    failures: dict[str, Exception] = {}
    service = FakeTensorboard()

    def send(call, region, credentials):
        calls.append((call, region))
        key = f"{call.method}:{getattr(call.request, 'context_id', '')}"
        if key in failures:
            raise failures[key]
        return service(call)

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
    assert vertex_experiments.MAX_RUN_ID == constants._EXPERIMENT_RUN_MAX_LENGTH
    reference = constants._TENSORBOARD_RUN_REFERENCE_ARTIFACT
    assert vertex_time_series.TENSORBOARD_RUN_SCHEMA == reference.schema_title
    assert vertex_time_series.TENSORBOARD_RUN_SCHEMA_VERSION == reference.schema_version
    assert vertex_time_series.TENSORBOARD_RUN_ARTIFACT_SUFFIX == (
        constants._TB_RUN_ARTIFACT_POST_FIX_ID
    )
    assert vertex_time_series.TRACKING_LABEL == constants._VERTEX_EXPERIMENT_TRACKING_LABEL
    assert vertex_time_series.RESOURCE_NAME_KEY == constants.GCP_ARTIFACT_RESOURCE_NAME_KEY
    assert vertex_time_series.EXPERIMENT_LABELS == constants._VERTEX_EXPERIMENT_TB_EXPERIMENT_LABEL
    assert vertex_time_series.BACKING_TENSORBOARD_KEY == (
        constants._BACKING_TENSORBOARD_RESOURCE_KEY
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


@pytest.fixture(scope="module")
def model_run(tmp_path_factory) -> str:
    """The Trainer's `model_run` as its TensorBoard callback leaves it: `train/` and
    `validation/` event files of `epoch_<metric>` scalars, one step per epoch."""
    import tensorflow as tf

    folder = tmp_path_factory.mktemp("model_run")
    for split, scalars in EPOCHS.items():
        with tf.summary.create_file_writer(str(folder / split)).as_default():
            for name, values in scalars.items():
                for epoch, value in enumerate(values):
                    tf.summary.scalar(f"epoch_{name}", value, step=epoch)
    return str(folder)


def trained_job(evaluation: str, model_run: str):
    """A blessed, pushed job whose Trainer wrote its TensorBoard logs to `model_run`."""
    found = evaluated_job(evaluation, pushed=1.0, pushed_destination=PUSHED_TO)
    found.job_detail.task_details.append(
        gca.PipelineTaskDetail(
            task_id=9,
            parent_task_id=DAG,
            task_name="Trainer",
            state=gca.PipelineTaskDetail.State.SUCCEEDED,
            outputs=outputs("model_run", model_run),
        )
    )
    return found


@pytest.fixture(scope="module")
def tensorboard_config(vertex_config):
    tracking = vertex_config.tracking.model_copy(update={"vertex_tensorboard": TENSORBOARD})
    return vertex_config.model_copy(update={"tracking": tracking})


def _methods(calls) -> list[str]:
    return [call.method for call, _ in calls]


def test_the_trainers_epoch_histories_reach_the_experiment_run_as_time_series(
    evaluation, model_run, tensorboard_config, recorded, monkeypatch, caplog
):
    calls, _ = recorded
    run_handler(
        final_status("SUCCEEDED"),
        trained_job(evaluation, model_run),
        tensorboard_config,
        monkeypatch,
    )

    assert not [r for r in caplog.records if r.getMessage().endswith("result stands")]
    series = sorted(
        [
            "train.loss",
            "train.accuracy",
            "val.loss",
            "val.accuracy",
            "learning_rate",
            "throughput.examples_per_second",
            "epoch_seconds",
        ]
    )
    assert _methods(calls) == [
        "MetadataService.CreateContext",
        "MetadataService.CreateContext",
        "MetadataService.AddContextChildren",
        "TensorboardService.CreateTensorboardExperiment",
        "TensorboardService.CreateTensorboardRun",
        "TensorboardService.ListTensorboardTimeSeries",
        *["TensorboardService.CreateTensorboardTimeSeries"] * len(series),
        "TensorboardService.WriteTensorboardRunData",
        "MetadataService.CreateArtifact",
        "MetadataService.AddContextArtifactsAndExecutions",
    ]
    requests = [call.request for call, _ in calls]
    experiment = requests[0].context
    assert experiment.metadata["backing_tensorboard_resource"] == TENSORBOARD
    tb_experiment, tb_run = requests[3], requests[4]
    assert (tb_experiment.parent, tb_experiment.tensorboard_experiment_id) == (
        TENSORBOARD,
        EXPERIMENT,
    )
    assert tb_run.parent == f"{TENSORBOARD}/experiments/{EXPERIMENT}"
    assert tb_run.tensorboard_run_id == JOB_ID
    created = [r.tensorboard_time_series for r in requests[6 : 6 + len(series)]]
    assert [s.display_name for s in created] == series  # named as the MLflow histories
    assert {s.value_type for s in created} == {gca.TensorboardTimeSeries.ValueType.SCALAR}

    # Each series holds the Trainer's values, one step per epoch, as MLflow's histories do.
    (write,) = [r for r in requests if isinstance(r, gca.WriteTensorboardRunDataRequest)]
    from google.cloud.aiplatform import tensorboard as tensorboard_resource

    run_name = tensorboard_resource.TensorboardRun._format_resource_name(
        project="123",
        location="us-central1",
        tensorboard="456",
        experiment=EXPERIMENT,
        run=JOB_ID,
    )
    assert write.tensorboard_run == run_name
    points = {}
    for data in write.time_series_data:
        points[data.tensorboard_time_series_id] = [
            (p.step, pytest.approx(p.scalar.value)) for p in data.values
        ]
    # FakeTensorboard names the series 700, 701, ... in the order they were created.
    named = dict(zip(series, sorted(points), strict=True))
    assert points[named["train.loss"]] == list(enumerate(EPOCHS["train"]["loss"], start=1))
    assert points[named["val.accuracy"]] == list(
        enumerate(EPOCHS["validation"]["accuracy"], start=1)
    )
    assert points[named["learning_rate"]] == list(
        enumerate(EPOCHS["train"]["learning_rate"], start=1)
    )
    assert points[named["throughput.examples_per_second"]] == list(
        enumerate(EPOCHS["train"]["examples_per_second"], start=1)
    )

    # The SDK finds the TensorboardRun through the artifact, as `ExperimentRun` looks it up.
    from google.cloud.aiplatform.metadata import artifact as sdk_artifact
    from google.cloud.aiplatform.metadata import context, experiment_run_resource

    made, link = requests[-2], requests[-1]
    stored = gca.Artifact(made.artifact)
    stored.name = f"{STORE}/artifacts/{made.artifact_id}"
    found = sdk_artifact.Artifact._construct_sdk_resource_from_gapic(
        stored, project="123", location="us-central1", credentials=AnonymousCredentials()
    )
    run_context = gca.Context(requests[1].context)
    run_context.name = f"{STORE}/contexts/{requests[1].context_id}"
    node = context.Context._construct_sdk_resource_from_gapic(
        run_context, project="123", location="us-central1", credentials=AnonymousCredentials()
    )
    sdk_run = experiment_run_resource.ExperimentRun.__new__(experiment_run_resource.ExperimentRun)
    sdk_run._metadata_node = node
    assert sdk_run._is_backing_tensorboard_run_artifact(found)
    assert found.metadata["resourceName"] == run_name
    assert link.context == run_context.name and list(link.artifacts) == [stored.name]


def _steps_by_series(writes) -> dict[str, list[int]]:
    return {
        data.tensorboard_time_series_id: [point.step for point in data.values]
        for write in writes
        for data in write.time_series_data
    }


def test_a_rerun_handler_writes_into_the_series_it_made(
    evaluation, model_run, tensorboard_config, recorded, monkeypatch, caplog
):
    calls, _ = recorded
    found = trained_job(evaluation, model_run)
    run_handler(final_status("SUCCEEDED"), found, tensorboard_config, monkeypatch)
    first = [c.request for c, _ in calls if c.method.endswith("WriteTensorboardRunData")]
    calls.clear()
    run_handler(final_status("SUCCEEDED"), found, tensorboard_config, monkeypatch)

    assert "TensorboardService.CreateTensorboardTimeSeries" not in _methods(calls)
    again = [c.request for c, _ in calls if c.method.endswith("WriteTensorboardRunData")]
    # The same points to the same series: a step written again overwrites itself.
    assert first and _steps_by_series(again) == _steps_by_series(first)
    assert not [r for r in caplog.records if r.getMessage().endswith("result stands")]


def test_a_tensorboard_that_refuses_is_one_warning_and_the_run_keeps_its_metrics(
    evaluation, model_run, tensorboard_config, recorded, monkeypatch, caplog
):
    calls, failures = recorded
    failures["TensorboardService.CreateTensorboardExperiment:"] = api_exceptions.PermissionDenied(
        "aiplatform.tensorboardExperiments.create denied"
    )
    run_handler(
        final_status("SUCCEEDED"),
        trained_job(evaluation, model_run),
        tensorboard_config,
        monkeypatch,
    )

    (warning,) = [r.getMessage() for r in caplog.records if r.getMessage().endswith("stands")]
    assert warning == (
        f"the run was not logged to Vertex AI Experiments {EXPERIMENT}: PermissionDenied: 403 "
        "aiplatform.tensorboardExperiments.create denied; the run's result stands"
    )
    run = calls[1][0].request.context  # sent before the series: params and metrics are there
    assert run.metadata["_metrics"]["eval.accuracy"] == pytest.approx(0.97)


def test_without_a_tensorboard_only_the_final_metrics_are_sent(
    evaluation, model_run, vertex_config, recorded, monkeypatch
):
    calls, _ = recorded
    run_handler(
        final_status("SUCCEEDED"), trained_job(evaluation, model_run), vertex_config, monkeypatch
    )

    assert _methods(calls) == [
        "MetadataService.CreateContext",
        "MetadataService.CreateContext",
        "MetadataService.AddContextChildren",
    ]
    assert "backing_tensorboard_resource" not in calls[0][0].request.context.metadata
