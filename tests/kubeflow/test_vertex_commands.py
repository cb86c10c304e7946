"""`submit` and `schedule` dry runs print exactly the requests a real run would send."""

from __future__ import annotations

import json

import pytest
from tpu_pipeline.cli.main import main
from tpu_pipeline.kubeflow.vertex_requests import FOUND_SCHEDULE

SERVICE_ACCOUNT = "tpu-pipeline@your-gcp-project.iam.gserviceaccount.com"


def _dry_run(capsys, compile_spec, *argv: str) -> dict:
    config, _, path = compile_spec("cpu")
    command = [*argv, "--config", "kubeflow/vertex-cpu.yaml", "--pipeline-json", str(path)]
    assert main([*command, "--dry-run"]) == 0
    return json.loads(capsys.readouterr().out)


def test_submit_dry_run_prints_the_create_pipeline_job_request(capsys, compile_spec):
    printed = _dry_run(capsys, compile_spec, "submit", "--train-steps", "50")
    call = printed["submit"]
    assert call["method"] == "PipelineService.CreatePipelineJob"
    request = call["request"]
    assert request["parent"] == "projects/your-gcp-project/locations/us-central1"
    assert request["pipelineJobId"].startswith("tpu-pipeline-digits-")
    job = request["pipelineJob"]
    assert job["serviceAccount"] == SERVICE_ACCOUNT
    assert job["labels"]["app"] == "tpu-pipeline"
    runtime = job["runtimeConfig"]
    assert runtime["gcsOutputDirectory"] == "gs://your-gcp-project-tpu-pipeline/pipeline_root"
    assert json.loads(runtime["parameters"]["train_args"]["stringValue"]) == {"num_steps": 50}
    assert runtime["parameters"]["data_root"]["stringValue"] == (
        "gs://your-gcp-project-tpu-pipeline/data/digits"
    )
    tasks = job["pipelineSpec"]["root"]["dag"]["tasks"]
    assert all(task["cachingOptions"]["enableCache"] for task in tasks.values())


def test_submit_without_cache_disables_caching_for_every_task(capsys, compile_spec):
    printed = _dry_run(capsys, compile_spec, "submit", "--set", "enable_cache=false")
    tasks = printed["submit"]["request"]["pipelineJob"]["pipelineSpec"]["root"]["dag"]["tasks"]
    assert not any(task["cachingOptions"].get("enableCache") for task in tasks.values())


def test_schedule_create_dry_run_looks_up_by_name_then_creates_or_updates(capsys, compile_spec):
    printed = _dry_run(
        capsys,
        compile_spec,
        "schedule",
        "create",
        "--cron",
        "0 4 * * *",
        "--set",
        "vertex.schedule.time_zone=Europe/Paris",
        "--set",
        "vertex.schedule.start_time=2027-01-04T00:00:00Z",
    )
    lookup = printed["lookup"]
    assert lookup["method"] == "ScheduleService.ListSchedules"
    assert lookup["request"]["filter"] == 'display_name="tpu-pipeline-digits"'

    create = printed["if_none_found"]
    assert create["method"] == "ScheduleService.CreateSchedule"
    schedule = create["request"]["schedule"]
    assert schedule["displayName"] == "tpu-pipeline-digits"
    assert schedule["cron"] == "TZ=Europe/Paris 0 4 * * *"
    assert schedule["maxConcurrentRunCount"] == "1"
    assert schedule["startTime"] == "2027-01-04T00:00:00Z"
    job_request = schedule["createPipelineJobRequest"]
    assert job_request["parent"] == "projects/your-gcp-project/locations/us-central1"
    assert job_request["pipelineJob"]["serviceAccount"] == SERVICE_ACCOUNT
    assert "Trainer" in job_request["pipelineJob"]["pipelineSpec"]["root"]["dag"]["tasks"]

    # A schedule that already exists is updated with the same settings: never a duplicate.
    update = printed["if_found"]
    assert update["method"] == "ScheduleService.UpdateSchedule"
    assert update["request"]["schedule"]["name"] == FOUND_SCHEDULE
    assert update["request"]["schedule"]["cron"] == schedule["cron"]
    assert set(update["request"]["updateMask"].split(",")) == {
        "cron",
        "maxConcurrentRunCount",
        "startTime",
        "createPipelineJobRequest",
    }


@pytest.mark.parametrize(
    ("action", "method"),
    [("pause", "PauseSchedule"), ("resume", "ResumeSchedule"), ("delete", "DeleteSchedule")],
)
def test_schedule_actions_dry_run_act_on_the_schedule_found_by_name(
    capsys, compile_spec, action, method
):
    printed = _dry_run(capsys, compile_spec, "schedule", action)
    assert printed["lookup"]["request"]["filter"] == 'display_name="tpu-pipeline-digits"'
    assert printed[action] == {
        "method": f"ScheduleService.{method}",
        "request": {"name": FOUND_SCHEDULE, **({"catchUp": False} if action == "resume" else {})},
    }


def test_submit_without_a_compiled_spec_says_to_compile_first(capsys, tmp_path):
    missing = tmp_path / "pipeline.json"
    argv = ["submit", "--config", "kubeflow/vertex-cpu.yaml", "--pipeline-json", str(missing)]
    assert main([*argv, "--dry-run"]) == 1
    assert "tpu-pipeline compile --target vertex" in capsys.readouterr().err


def test_compile_command_writes_the_spec_and_names_the_image(capsys, tmp_path):
    output = tmp_path / "pipeline.json"
    argv = ["compile", "--target", "vertex", "--config", "kubeflow/vertex-cpu.yaml"]
    assert main([*argv, "--output", str(output)]) == 0
    assert json.loads(output.read_text())["displayName"] == "tpu-pipeline-digits"
    assert "pipeline:0.1.0" in capsys.readouterr().out
