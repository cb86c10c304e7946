"""On Vertex AI the webhook hears every run's end from an exit handler, failed runs included."""

from __future__ import annotations

import json

from kubeflow.exit_handler import NotifyWebhook, vertex_run_message
from tests.common.webhook_server import webhook_server
from tests.kubeflow.conftest import task_parameter

JOB = "projects/123/locations/us-central1/pipelineJobs/tpu-pipeline-digits-20261201"
NOTIFY = {"notify.webhook": "https://hooks.example.com/services/T/B/X", "notify.timeout_seconds": 7}


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


def test_the_compiled_spec_runs_the_exit_handler_after_the_whole_dag_however_it_ended(
    compile_spec,
):
    config, spec, _ = compile_spec("cpu", **NOTIFY)
    pipeline = spec["pipelineSpec"]
    root_tasks = pipeline["root"]["dag"]["tasks"]
    assert set(root_tasks) == {"tfx-dag", "NotifyWebhook"}
    handler = root_tasks["NotifyWebhook"]
    assert handler["triggerPolicy"]["strategy"] == "ALL_UPSTREAM_TASKS_COMPLETED"
    assert handler["dependentTasks"] == ["tfx-dag"]
    status = handler["inputs"]["parameters"]["final_status"]
    assert status == {"taskFinalStatus": {"producerTask": "tfx-dag"}}
    # The pipeline's own tasks moved under tfx-dag, Pusher included.
    assert {"ExampleGen", "DataGate", "Trainer", "Pusher"} <= set(
        pipeline["components"]["tfx-dag"]["dag"]["tasks"]
    )
    assert task_parameter(spec, "NotifyWebhook", "webhook") == NOTIFY["notify.webhook"]
    assert task_parameter(spec, "NotifyWebhook", "pipeline_name") == config.full_pipeline_name
    executor = pipeline["deploymentSpec"]["executors"]["NotifyWebhook_executor"]["container"]
    assert executor["image"] == config.vertex.pipeline_image
    assert "kubeflow.exit_handler.NotifyWebhook_Executor" in json.dumps(executor)


def test_without_notify_the_spec_has_no_exit_handler(compile_spec):
    _, spec, _ = compile_spec("cpu")
    assert "NotifyWebhook" not in spec["pipelineSpec"]["root"]["dag"]["tasks"]


def test_each_final_state_is_an_outcome_with_the_runs_console_page():
    succeeded = lines(vertex_run_message("tpu-pipeline-digits", final_status("SUCCEEDED")))
    assert succeeded == [
        "tpu-pipeline tpu-pipeline-digits on Vertex AI: *succeeded*",
        "run: https://console.cloud.google.com/vertex-ai/locations/us-central1/pipelines/runs/"
        "tpu-pipeline-digits-20261201?project=123 (metrics, blessing and push)",
    ]
    failed = lines(vertex_run_message("p", final_status("FAILED", "failed tasks: [Trainer].")))
    assert failed[:2] == ["tpu-pipeline p on Vertex AI: *failed*", "failed tasks: [Trainer]."]
    rejected = vertex_run_message("p", final_status("FAILED", "failed tasks: [DataGate]."))
    assert lines(rejected)[0].endswith("*data rejected*")
    cancelled = vertex_run_message("p", final_status("CANCELLED"))
    assert lines(cancelled)[0].endswith("*interrupted*")


def test_the_exit_handler_step_posts_once_and_a_failing_webhook_does_not_fail_the_step():
    executor = NotifyWebhook.EXECUTOR_SPEC.executor_class()  # what the container runs
    with webhook_server() as (url, server):
        executor.Do(
            {},
            {},
            {
                "final_status": final_status("FAILED", "failed tasks: [Evaluator]."),
                "webhook": url,
                "timeout_seconds": 5.0,
                "pipeline_name": "tpu-pipeline-digits",
            },
        )
    ((_, message),) = server.received
    assert lines(message)[:2] == [
        "tpu-pipeline tpu-pipeline-digits on Vertex AI: *failed*",
        "failed tasks: [Evaluator].",
    ]
    with webhook_server(status=500) as (url, server):
        executor.Do(  # returns: a refused message is a warning in the step's log
            {},
            {},
            {
                "final_status": final_status("SUCCEEDED"),
                "webhook": url,
                "timeout_seconds": 5.0,
                "pipeline_name": "p",
            },
        )
    assert len(server.received) == 1
