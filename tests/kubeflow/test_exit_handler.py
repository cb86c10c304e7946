"""On Vertex AI the webhook hears every run's end from an exit handler, failed runs included.

The handler reads the finished job back: here an `aiplatform_v1` PipelineJob as
GetPipelineJob returns it, its artifacts pointing at real TFMA output and real
TFDV anomalies in local folders (the handler reads them as it reads Cloud Storage).
"""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest
import tensorflow_data_validation as tfdv
from kfp.pipeline_spec import pipeline_spec_pb2
from tensorflow_metadata.proto.v0 import schema_pb2, statistics_pb2

import tpu_pipeline.common.webhook
import tpu_pipeline.kubeflow.exit_handler
from tests.common.webhook_server import webhook_server
from tests.kubeflow.conftest import task_parameter
from tests.pipeline.tfma_results import NAMES, write_evaluation
from tpu_pipeline.common import vertex_types as gca
from tpu_pipeline.common.config import DriftConfig, EvaluatorConfig
from tpu_pipeline.kubeflow.exit_handler import RunEnded, vertex_run_message
from tpu_pipeline.kubeflow.job_summary import job_summary

JOB = "projects/123/locations/us-central1/pipelineJobs/tpu-pipeline-digits-20261201"
CONSOLE = (
    "run: https://console.cloud.google.com/vertex-ai/locations/us-central1/pipelines/runs/"
    "tpu-pipeline-digits-20261201?project=123"
)
SECRET_NAME = "projects/your-gcp-project/secrets/tpu-pipeline-webhook/versions/3"
NOTIFY = {"notify.webhook_secret": SECRET_NAME, "notify.timeout_seconds": 7}
PUSHED_TO = "gs://bucket/serving_model/1764547200"
WORKER_FAILED = "The replica workerpool0-0 exited with a non-zero status of 1."
ROOT, DAG = 1, 2  # task ids of the job's root DAG and of `tfx-dag`, which holds the components


def final_status(state: str, message: str = "") -> str:
    """What Vertex passes the exit handler: KFP's PipelineTaskFinalStatus as JSON."""
    error = {"code": 9, "message": message} if message else {}
    return json.dumps(
        {
            "state": state,
            "error": error,
            "pipelineJobResourceName": JOB,
            "pipelineTaskName": "tfx-dag",
        }
    )


def lines(message: dict) -> list[str]:
    return message["text"].splitlines()


def outputs(key: str, uri: str, **metadata) -> dict[str, gca.PipelineTaskDetail.ArtifactList]:
    """A task's output `key`: one artifact, with TFX's properties as Vertex records them."""
    return {
        key: gca.PipelineTaskDetail.ArtifactList(
            artifacts=[gca.Artifact(uri=uri, metadata=metadata)]
        )
    }


def job(**tasks: tuple[gca.PipelineTaskDetail.State, dict, str]) -> gca.PipelineJob:
    """The job as the exit handler finds it: `tasks` are name=(state, outputs, error message)."""
    details = [
        gca.PipelineTaskDetail(
            task_id=ROOT,
            task_name="tpu-pipeline-digits-20261201",
            state=gca.PipelineTaskDetail.State.RUNNING,
        ),
        gca.PipelineTaskDetail(
            task_id=DAG,
            parent_task_id=ROOT,
            task_name="tfx-dag",
            state=gca.PipelineTaskDetail.State.FAILED,
        ),
        gca.PipelineTaskDetail(
            task_id=3,
            parent_task_id=ROOT,
            task_name="RunEnded",
            state=gca.PipelineTaskDetail.State.RUNNING,
        ),
    ]
    for task_id, (name, (state, outs, error)) in enumerate(tasks.items(), start=10):
        details.append(
            gca.PipelineTaskDetail(
                task_id=task_id,
                parent_task_id=DAG,
                task_name=name,
                state=state,
                outputs=outs,
                error={"code": 9, "message": error} if error else None,
                end_time={"seconds": 1764547200 + task_id},
            )
        )
    return gca.PipelineJob(name=JOB, job_detail=gca.PipelineJobDetail(task_details=details))


def _predictions(correct: int = 97, count: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """`correct` of `count` examples predicted right, each with probability 0.7."""
    labels = np.arange(count) % len(NAMES)
    predicted = labels.copy()
    predicted[correct:] = (labels[correct:] + 1) % len(NAMES)
    probabilities = np.full((count, len(NAMES)), 0.1)
    probabilities[np.arange(count), predicted] = 0.7
    return labels, probabilities


@pytest.fixture(scope="module")
def evaluation(tmp_path_factory) -> str:
    """TFMA's output for a model with accuracy 0.97: blessed under the 0.9 lower bound."""
    return write_evaluation(str(tmp_path_factory.mktemp("evaluation")), *_predictions())


@pytest.fixture(scope="module")
def refused_evaluation(tmp_path_factory) -> str:
    """The same predictions under a 0.99 lower bound: the Evaluator refuses them."""
    return write_evaluation(
        str(tmp_path_factory.mktemp("refused")),
        *_predictions(),
        EvaluatorConfig(accuracy_lower_bound=0.99),
    )


@pytest.fixture(scope="module")
def anomalies(tmp_path_factory) -> str:
    """ExampleValidator's output (TFDV's own anomalies) for train pixels of 99, where 0-16 are
    allowed; eval is clean."""
    schema = schema_pb2.Schema(
        feature=[
            schema_pb2.Feature(
                name="pixels",
                type=schema_pb2.FLOAT,
                float_domain=schema_pb2.FloatDomain(min=0, max=16),
            )
        ]
    )
    uri = tmp_path_factory.mktemp("anomalies")
    for split, largest in (("train", 99.0), ("eval", 16.0)):
        pixels = statistics_pb2.FeatureNameStatistics(
            name="pixels",
            type=statistics_pb2.FeatureNameStatistics.FLOAT,
            num_stats=statistics_pb2.NumericStatistics(
                min=0,
                max=largest,
                common_stats=statistics_pb2.CommonStatistics(
                    num_non_missing=10, min_num_values=1, max_num_values=1, avg_num_values=1
                ),
            ),
        )
        statistics = statistics_pb2.DatasetFeatureStatisticsList(
            datasets=[statistics_pb2.DatasetFeatureStatistics(num_examples=10, features=[pixels])]
        )
        folder = uri / f"Split-{split}"
        folder.mkdir()
        found = tfdv.validate_statistics(statistics, schema)
        (folder / "SchemaDiff.pb").write_bytes(found.SerializeToString())
    return str(uri)


def evaluated_job(evaluation: str, blessed: float = 1.0, **pushed) -> gca.PipelineJob:
    """A job whose Evaluator and Pusher succeeded: `pushed` is the PushedModel's properties."""
    done = gca.PipelineTaskDetail.State.SUCCEEDED
    return job(
        Evaluator=(
            done,
            {
                **outputs("evaluation", evaluation),
                **outputs("blessing", evaluation + "/blessing", blessed=blessed),
            },
            "",
        ),
        Pusher=(done, outputs("pushed_model", "gs://root/Pusher/pushed_model/9", **pushed), ""),
    )


def message_for(state: str, found: gca.PipelineJob, error: str = "") -> list[str]:
    return lines(
        vertex_run_message("tpu-pipeline-digits", final_status(state, error), lambda _: found)
    )


def test_the_compiled_spec_runs_the_exit_handler_after_the_whole_dag_however_it_ended(
    compile_spec,
):
    config, spec, _ = compile_spec("cpu", **NOTIFY)
    pipeline = spec["pipelineSpec"]
    root_tasks = pipeline["root"]["dag"]["tasks"]
    assert set(root_tasks) == {"tfx-dag", "RunEnded"}
    handler = root_tasks["RunEnded"]
    assert handler["triggerPolicy"]["strategy"] == "ALL_UPSTREAM_TASKS_COMPLETED"
    assert handler["dependentTasks"] == ["tfx-dag"]
    status = handler["inputs"]["parameters"]["final_status"]
    assert status == {"taskFinalStatus": {"producerTask": "tfx-dag"}}
    # The pipeline's own tasks moved under tfx-dag, Pusher included.
    assert {"ExampleGen", "DataGate", "Trainer", "Pusher"} <= set(
        pipeline["components"]["tfx-dag"]["dag"]["tasks"]
    )
    # The URL is in no parameter: the handler reads it from Secret Manager when it posts.
    assert task_parameter(spec, "RunEnded", "webhook_secret") == SECRET_NAME
    assert set(handler["inputs"]["parameters"]) == {
        "final_status",
        "webhook_secret",
        "timeout_seconds",
        "pipeline_name",
        "class_names",
        "evaluator_config",
        "drift_config",
        "experiment",
        "run_config",
        "experiment_budget_seconds",
    }
    # No experiment to log to: nothing of Vertex AI Experiments is compiled in.
    assert task_parameter(spec, "RunEnded", "experiment") == ""
    assert task_parameter(spec, "RunEnded", "run_config") == ""
    # The shipped configs read spans (span-{SPAN}/): each new span is judged by these rules.
    drift = task_parameter(spec, "RunEnded", "drift_config")
    assert DriftConfig.model_validate(drift) == config.drift
    assert task_parameter(spec, "RunEnded", "pipeline_name") == config.full_pipeline_name
    # The slices are named and flagged as a local run of the same config does.
    assert task_parameter(spec, "RunEnded", "class_names") == list(config.dataset.class_names)
    evaluator = task_parameter(spec, "RunEnded", "evaluator_config")
    assert EvaluatorConfig.model_validate(evaluator) == config.evaluator
    executor = pipeline["deploymentSpec"]["executors"]["RunEnded_executor"]["container"]
    assert executor["image"] == config.vertex.pipeline_image
    assert "tpu_pipeline.kubeflow.exit_handler.RunEnded_Executor" in json.dumps(executor)


def test_a_notify_section_with_only_a_webhook_compiles_with_the_default_timeout(compile_spec):
    # TFX type-checks the handler's float parameter: an unvalidated int default failed here.
    _, spec, _ = compile_spec("cpu", **{"notify.webhook_secret": SECRET_NAME})
    handler = spec["pipelineSpec"]["root"]["dag"]["tasks"]["RunEnded"]
    timeout = handler["inputs"]["parameters"]["timeout_seconds"]
    assert timeout == {"runtimeValue": {"constantValue": {"doubleValue": 10.0}}}


def test_without_notify_the_spec_has_no_exit_handler(compile_spec):
    _, spec, _ = compile_spec("cpu")
    assert "RunEnded" not in spec["pipelineSpec"]["root"]["dag"]["tasks"]


def test_a_blessed_and_pushed_run_gives_the_local_messages_outcome_metrics_and_push(evaluation):
    found = evaluated_job(evaluation, pushed=1.0, pushed_destination=PUSHED_TO, already_pushed=0.0)
    assert message_for("SUCCEEDED", found) == [
        "tpu-pipeline tpu-pipeline-digits on Vertex AI: *blessed and pushed*",
        "passed every threshold (first model: no baseline yet); new version",
        "metrics: accuracy=0.97, example_count=100",
        f"pushed: {PUSHED_TO}",
        CONSOLE,
    ]


def test_a_model_the_evaluator_refused_is_not_blessed_with_its_metrics_and_why(
    refused_evaluation,
):
    found = evaluated_job(refused_evaluation, blessed=0.0, pushed=0.0)
    assert message_for("SUCCEEDED", found) == [
        "tpu-pipeline tpu-pipeline-digits on Vertex AI: *not blessed*",
        "accuracy 0.9700 is below the lower bound 0.9900",
        "metrics: accuracy=0.97, example_count=100",
        CONSOLE,
    ]


def test_data_the_datagate_stopped_is_rejected_naming_example_validators_anomalies(anomalies):
    found = job(
        ExampleValidator=(
            gca.PipelineTaskDetail.State.SUCCEEDED,
            outputs("anomalies", anomalies, split_names='["train", "eval"]', span=0.0),
            "",
        ),
        DataGate=(gca.PipelineTaskDetail.State.FAILED, {}, WORKER_FAILED),
    )
    title, why, *rest = message_for("FAILED", found, "The failed tasks are: [DataGate].")
    assert title == "tpu-pipeline tpu-pipeline-digits on Vertex AI: *data rejected*"
    assert why == (  # the DataGate's own words, TFDV's description of the anomaly
        "DataRejectedError: data rejected: 1 problem: train: pixels: Out-of-range values "
        "(Unexpectedly high value: 99>16(upto six significant digits))"
    )
    assert rest == [CONSOLE]  # no metrics, nothing pushed


def test_a_failed_run_names_the_task_that_failed_first_and_its_error():
    found = job(
        ExampleGen=(gca.PipelineTaskDetail.State.SUCCEEDED, {}, ""),
        Trainer=(gca.PipelineTaskDetail.State.FAILED, {}, WORKER_FAILED),
        Tuner=(gca.PipelineTaskDetail.State.FAILED, {}, "later"),
    )
    assert message_for("FAILED", found, "The failed tasks are: [Trainer, Tuner].") == [
        "tpu-pipeline tpu-pipeline-digits on Vertex AI: *failed*",
        f"Trainer: {WORKER_FAILED}",
        CONSOLE,
    ]


def test_a_cancelled_run_is_interrupted_during_the_task_it_stopped():
    found = job(Trainer=(gca.PipelineTaskDetail.State.CANCELLED, {}, ""))
    assert message_for("CANCELLED", found)[:2] == [
        "tpu-pipeline tpu-pipeline-digits on Vertex AI: *interrupted*",
        "by a cancel during Trainer; the same command resumes it",
    ]


@pytest.fixture
def no_credentials(tmp_path, monkeypatch):
    """Application Default Credentials that point at no file: google.auth fails at once."""
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing-key.json"))


def test_a_job_that_cannot_be_read_still_tells_the_final_state_and_why_metrics_are_missing(
    no_credentials,
):
    unread = (
        "metrics, blessing and push not read: VertexUnreachableError: no Google Cloud "
        "credentials: run `gcloud auth application-default login` or set "
        "GOOGLE_APPLICATION_CREDENTIALS to a service account key file"
    )
    succeeded = lines(vertex_run_message("p", final_status("SUCCEEDED")))  # the real reader
    assert succeeded == ["tpu-pipeline p on Vertex AI: *succeeded*", unread, CONSOLE]
    failed = lines(vertex_run_message("p", final_status("FAILED", "[Trainer].")))
    assert failed == ["tpu-pipeline p on Vertex AI: *failed*", "[Trainer].", unread, CONSOLE]
    rejected = vertex_run_message("p", final_status("FAILED", "[DataGate]."))
    assert lines(rejected)[0].endswith("*data rejected*")
    cancelled = vertex_run_message("p", final_status("CANCELLED"))
    assert lines(cancelled)[0].endswith("*interrupted*")


def test_a_status_naming_no_job_says_so_and_has_no_console_page():
    status = json.dumps({"state": "SUCCEEDED", "pipelineTaskName": "tfx-dag"})
    assert lines(vertex_run_message("p", status)) == [
        "tpu-pipeline p on Vertex AI: *succeeded*",
        "metrics, blessing and push not read: ValueError: '' is not a pipeline job's resource name",
    ]


def test_an_unwritten_or_unreadable_artifact_falls_back_to_the_final_state(tmp_path):
    no_push = evaluated_job(str(tmp_path))  # the Pusher wrote no `pushed`
    assert message_for("SUCCEEDED", no_push)[1].startswith(
        "metrics, blessing and push not read: LookupError: the job lists no written"
    )
    gone = str(tmp_path / "gone")
    missing = evaluated_job(gone, pushed=1.0, pushed_destination=PUSHED_TO)
    assert message_for("SUCCEEDED", missing) == [
        "tpu-pipeline tpu-pipeline-digits on Vertex AI: *succeeded*",
        "metrics, blessing and push not read: ArtifactReadError: the Evaluator's evaluation "
        f"at {gone}: AssertionError",  # all TFMA's loader says of a missing folder
        CONSOLE,
    ]


def test_a_job_read_that_hangs_is_abandoned_after_the_budget():
    hang = threading.Event()
    message = vertex_run_message(
        "p", final_status("SUCCEEDED"), lambda _: hang.wait(), budget_s=0.2
    )
    hang.set()
    assert lines(message)[1] == (
        f"metrics, blessing and push not read: TimeoutError: reading {JOB}: no answer within 0.2 s"
    )


def run_exit_handler(final_status_json: str, name: str = SECRET_NAME) -> None:
    """Runs the exit handler's executor as its container does."""
    executor = RunEnded.EXECUTOR_SPEC.executor_class()
    executor.Do(
        {},
        {},
        {
            "final_status": final_status_json,
            "webhook_secret": name,
            "timeout_seconds": 5.0,
            "pipeline_name": "tpu-pipeline-digits",
            "class_names": json.dumps([str(digit) for digit in range(10)]),
            "evaluator_config": EvaluatorConfig().model_dump_json(),
            "drift_config": DriftConfig().model_dump_json(),
            "experiment": "",
            "run_config": "",
            "experiment_budget_seconds": 5.0,
        },
    )


@pytest.fixture
def secret_holds(monkeypatch):
    """secret_holds(url): Secret Manager's version SECRET_NAME holds `url` (or raises it)."""
    reads = []

    def holds(url):
        def read(name, timeout_s):
            reads.append((name, timeout_s))
            if isinstance(url, Exception):
                raise url
            return url

        monkeypatch.setattr(tpu_pipeline.common.webhook, "read_secret_version", read)
        return reads

    return holds


def test_the_exit_handler_step_reads_the_url_from_secret_manager_and_posts_once(
    evaluation, monkeypatch, secret_holds
):
    found = evaluated_job(evaluation, pushed=1.0, pushed_destination=PUSHED_TO)
    monkeypatch.setattr(
        tpu_pipeline.kubeflow.exit_handler, "read_pipeline_job", {JOB: found}.__getitem__
    )
    with webhook_server() as (url, server):
        reads = secret_holds(url)
        run_exit_handler(final_status("SUCCEEDED"))
    assert reads == [(SECRET_NAME, 5.0)]  # bounded by notify.timeout_seconds
    ((_, message),) = server.received
    assert (
        lines(message)[0] == "tpu-pipeline tpu-pipeline-digits on Vertex AI: *blessed and pushed*"
    )
    assert "metrics: accuracy=0.97, example_count=100" in lines(message)


def test_a_failing_webhook_does_not_fail_the_step(secret_holds, no_credentials, caplog):
    with webhook_server(status=500) as (url, server):
        secret_holds(url)
        run_exit_handler(final_status("FAILED", "failed tasks: [Evaluator]."))  # returns
    ((_, message),) = server.received
    assert lines(message)[:2] == [
        "tpu-pipeline tpu-pipeline-digits on Vertex AI: *failed*",
        "failed tasks: [Evaluator].",
    ]
    (warning,) = [r.getMessage() for r in caplog.records if "result stands" in r.getMessage()]
    assert warning.startswith(f"notify.webhook_secret {SECRET_NAME} (127.0.0.1:")
    assert "refused the message: HTTP 500" in warning and "SECRET" not in warning


def _handler_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().endswith("result stands")]


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        ("not json at all", "outcome unknown"),
        ("[1, 2]", "outcome unknown"),
        ('{"state": 7, "error": "no"}', "outcome unknown"),
        ("{}", "outcome unknown"),
        ('{"pipelineJobResourceName": "projects/x"}', "outcome unknown"),
        ('{"state": "SUCCEEDED"}', "succeeded"),
    ],
    ids=["not-json", "a-list", "wrong-types", "empty", "no-state", "no-job"],
)
def test_whatever_the_final_status_holds_the_step_succeeds_and_still_posts(
    status, outcome, secret_holds, no_credentials, caplog
):
    with webhook_server() as (url, server):
        secret_holds(url)
        run_exit_handler(status)  # returns: the step succeeds
    ((_, message),) = server.received
    assert lines(message)[0] == f"tpu-pipeline tpu-pipeline-digits on Vertex AI: *{outcome}*"
    assert _handler_warnings(caplog) == []  # the post itself went through


def test_an_unreadable_secret_is_one_warning_line_and_a_succeeding_step(
    secret_holds, no_credentials, caplog
):
    secret_holds(PermissionError("403 Permission 'secretmanager.versions.access' denied"))
    run_exit_handler(final_status("SUCCEEDED"))
    assert _handler_warnings(caplog) == [
        f"notify.webhook_secret {SECRET_NAME} was not read: PermissionError: 403 Permission "
        "'secretmanager.versions.access' denied; the run's result stands"
    ]


def test_the_real_secret_manager_client_without_credentials_fails_soft(no_credentials, caplog):
    run_exit_handler(final_status("SUCCEEDED"))
    (warning,) = _handler_warnings(caplog)
    assert warning.startswith(f"notify.webhook_secret {SECRET_NAME} was not read: ")
    assert "DefaultCredentialsError" in warning


def test_a_secret_holding_plain_http_to_another_host_is_not_posted_and_not_shown(
    secret_holds, no_credentials, caplog
):
    secret_holds("http://hookuser:hookpass@hooks.example.com/services/TPATHTOKEN42?t=QTOKEN99")
    run_exit_handler(final_status("SUCCEEDED"))
    (warning,) = _handler_warnings(caplog)
    assert warning.startswith(
        f"notify.webhook_secret {SECRET_NAME} (hooks.example.com): not posted: http:// to "
    )
    assert all(part not in warning for part in ("hookuser", "hookpass", "TPATHTOKEN42", "QTOKEN99"))


@pytest.mark.parametrize(
    ("inputs", "why"),
    [
        ({"name": "projects/p/secrets/s"}, "ValidationError"),  # not a version's name
        ({"name": None}, "ValidationError"),
    ],
)
def test_bad_parameters_are_one_warning_and_a_succeeding_step(inputs, why, caplog):
    run_exit_handler(final_status("SUCCEEDED"), **inputs)
    (warning,) = _handler_warnings(caplog)
    assert warning.startswith(f"the run's outcome was not told: {why}")


def test_an_exception_building_the_message_is_one_warning_and_a_succeeding_step(
    monkeypatch, secret_holds, caplog
):
    def broken(*args, **kwargs):
        raise RuntimeError("the message builder broke")

    monkeypatch.setattr(tpu_pipeline.kubeflow.exit_handler, "job_message", broken)
    with webhook_server() as (url, server):
        reads = secret_holds(url)
        run_exit_handler(final_status("SUCCEEDED"))
    assert server.received == [] and reads == []
    assert _handler_warnings(caplog) == [
        "the run's outcome was not told: RuntimeError: the message builder broke; "
        "the run's result stands"
    ]


def test_a_plain_webhook_is_a_config_error_for_vertex_naming_the_secret_field():
    from tests.kubeflow.conftest import DEPLOYMENT_CONFIGS
    from tpu_pipeline.common.config import ConfigError, load_config
    from tpu_pipeline.kubeflow.runner import compile_pipeline

    url = "https://hookuser:hookpass@hooks.example.com/services/TPATHTOKEN42?token=QTOKEN99"
    config = load_config(str(DEPLOYMENT_CONFIGS["cpu"]), {"notify.webhook": url})
    with pytest.raises(ConfigError, match=r"^notify\.webhook: on Vertex AI .* notify\.webhook_sec"):
        compile_pipeline(config, "/nonexistent/pipeline.json")


def test_data_not_in_spans_compiles_no_drift_rules_into_the_exit_handler(compile_spec):
    _, spec, _ = compile_spec("cpu", **NOTIFY, **{"dataset.file_pattern": "*.tfrecord*"})
    assert task_parameter(spec, "RunEnded", "drift_config") == ""


def add_succeeded_task(found: gca.PipelineJob, name: str, outs: dict) -> None:
    """Adds to the job a task of the DAG named `name` that succeeded with the outputs `outs`."""
    found.job_detail.task_details.append(
        gca.PipelineTaskDetail(
            task_id=90 + len(found.job_detail.task_details),
            parent_task_id=DAG,
            task_name=name,
            state=gca.PipelineTaskDetail.State.SUCCEEDED,
            outputs=outs,
        )
    )


def _model_with_reference(folder, images: np.ndarray) -> str:
    """A Trainer Model artifact's folder whose SavedModel keeps the drift reference of `images`."""
    from tpu_pipeline.components.drift.reference import REFERENCE_PATH
    from tpu_pipeline.components.drift.signals import pixel_signals

    signals = {name: values.tolist() for name, values in pixel_signals(images[..., None]).items()}
    path = folder / "Format-Serving" / REFERENCE_PATH
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"train": signals, "eval": {"confidence": [1.0] * len(images)}}))
    return str(folder)


@pytest.mark.parametrize("inverted", [False, True])
def test_a_span_run_on_vertex_compares_the_new_spans_images_with_the_served_models(
    evaluation, tmp_path, inverted
):
    from sklearn.datasets import load_digits

    digits = load_digits().images.astype(np.float32)
    served = _model_with_reference(tmp_path / "served", digits[::2])
    new_images = 16 - digits[1::2] if inverted else digits[1::2]
    new = _model_with_reference(tmp_path / "new", new_images)
    found = evaluated_job(evaluation, pushed=1.0, pushed_destination=PUSHED_TO)
    add_succeeded_task(found, "Trainer", outputs("model", new))
    for task in found.job_detail.task_details:  # the Evaluator's baseline: the served model
        if task.task_name == "Evaluator":
            task.outputs["blessing"].artifacts[0].metadata["baseline_model"] = served

    def message(drift):
        return lines(
            vertex_run_message(
                "tpu-pipeline-digits", final_status("SUCCEEDED"), lambda _: found, drift=drift
            )
        )

    shifted = [line for line in message(DriftConfig()) if line.startswith("span shift: ")]
    if inverted:
        assert len(shifted) == 1 and "brightness" in shifted[0] and " -> " in shifted[0]
        assert "899 training images of the served model" in shifted[0]  # the even half
    else:
        assert shifted == []  # a steady span is not worth a line in the webhook message
    # Without drift rules (the data is not in spans) nothing is compared.
    assert not [line for line in message(None) if line.startswith("span shift")]


def test_a_span_the_gate_held_back_on_vertex_is_the_span_shift_and_why_nothing_was_pushed(
    evaluation, tmp_path
):
    headline = (
        "span shift: 1 of 3 signals moved from the model's reference (899 training images of "
        "the served model): brightness 1.000 > 0.2 (mean 4.868 -> mean 11.12)"
    )
    verdict = tmp_path / "verdict"
    verdict.write_text(json.dumps({"checked": True, "shifted": True, "headline": headline}))
    held = "held back by drift.block_push: the new span's images moved from the served model's"
    found = evaluated_job(evaluation, pushed=0.0, push_refused=held)
    add_succeeded_task(found, "SpanShiftGate", outputs("verdict", str(verdict), shifted=1.0))

    rules = DriftConfig(block_push=True)
    message = lines(
        vertex_run_message(
            "tpu-pipeline-digits", final_status("SUCCEEDED"), lambda _: found, drift=rules
        )
    )
    summary = job_summary(
        "tpu-pipeline-digits",
        pipeline_spec_pb2.PipelineTaskFinalStatus(state="SUCCEEDED"),
        found,
        drift=rules,
    )

    assert message[0].endswith("*blessed, not pushed*")
    assert headline in message  # the verdict the Pusher obeyed, not a second comparison
    assert summary.span_shift["headline"] == headline and summary.span_shifted
    assert summary.pushed_model is None and summary.push_note == held
