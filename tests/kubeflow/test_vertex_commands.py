"""`submit` and `schedule` dry runs show what to check, and write exactly the requests a real
run would send to a file they name."""

from __future__ import annotations

import json
import pathlib

import pytest

from tests.kubeflow.conftest import own_project_config
from tpu_pipeline.cli.main import main
from tpu_pipeline.kubeflow.vertex_requests import FOUND_SCHEDULE

PROJECT = "acme-ml-prod"
SERVICE_ACCOUNT = f"tpu-pipeline@{PROJECT}.iam.gserviceaccount.com"


@pytest.fixture(scope="module")
def own_spec(tmp_path_factory):
    """own_spec("cpu") -> (config, spec, path): vertex-cpu.yaml as a user edits it, compiled."""
    from tpu_pipeline.common.config import load_config
    from tpu_pipeline.kubeflow.runner import compile_pipeline

    folder = tmp_path_factory.mktemp("own-spec")
    config = load_config(str(own_project_config(folder)))
    path = folder / "pipeline.json"
    spec = compile_pipeline(config, path)

    def compiled(target: str):
        assert target == "cpu"
        return config, spec, path

    return compiled


def _dry_run_lines(capsys, own_spec, tmp_path, *argv: str) -> tuple[list[str], dict]:
    """(the lines printed, the requests written to the file they name)."""
    _, _, path = own_spec("cpu")
    config = own_project_config(tmp_path)
    command = [*argv, "--config", str(config), "--pipeline-json", str(path)]
    assert main([*command, "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    (named,) = [line for line in lines if line.startswith("  requests ")]
    requests_path = named.split()[1]
    return lines, json.loads(pathlib.Path(requests_path).read_text())


def _dry_run(capsys, own_spec, tmp_path, *argv: str) -> dict:
    return _dry_run_lines(capsys, own_spec, tmp_path, *argv)[1]


def test_submit_dry_run_prints_the_create_pipeline_job_request(capsys, own_spec, tmp_path):
    printed = _dry_run(capsys, own_spec, tmp_path, "submit", "--train-steps", "50")
    call = printed["submit"]
    assert call["method"] == "PipelineService.CreatePipelineJob"
    request = call["request"]
    assert request["parent"] == "projects/acme-ml-prod/locations/us-central1"
    assert request["pipelineJobId"].startswith("tpu-pipeline-digits-")
    job = request["pipelineJob"]
    assert job["serviceAccount"] == SERVICE_ACCOUNT
    assert job["labels"]["app"] == "tpu-pipeline"
    runtime = job["runtimeConfig"]
    assert runtime["gcsOutputDirectory"] == "gs://acme-ml-prod-tpu-pipeline/pipeline_root"
    assert json.loads(runtime["parameters"]["train_args"]["stringValue"]) == {"num_steps": 50}
    assert runtime["parameters"]["data_root"]["stringValue"] == (
        "gs://acme-ml-prod-tpu-pipeline/data/digits"
    )
    tasks = job["pipelineSpec"]["root"]["dag"]["tasks"]
    assert all(task["cachingOptions"]["enableCache"] for task in tasks.values())


def test_submit_without_cache_disables_caching_for_every_task(capsys, own_spec, tmp_path):
    printed = _dry_run(capsys, own_spec, tmp_path, "submit", "--set", "enable_cache=false")
    tasks = printed["submit"]["request"]["pipelineJob"]["pipelineSpec"]["root"]["dag"]["tasks"]
    assert not any(task["cachingOptions"].get("enableCache") for task in tasks.values())


def test_schedule_create_dry_run_looks_up_by_name_then_creates_or_updates(
    capsys, own_spec, tmp_path
):
    printed = _dry_run(
        capsys,
        own_spec,
        tmp_path,
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
    assert job_request["parent"] == "projects/acme-ml-prod/locations/us-central1"
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
    capsys, own_spec, tmp_path, action, method
):
    printed = _dry_run(capsys, own_spec, tmp_path, "schedule", action)
    assert printed["lookup"]["request"]["filter"] == 'display_name="tpu-pipeline-digits"'
    assert printed[action] == {
        "method": f"ScheduleService.{method}",
        "request": {"name": FOUND_SCHEDULE, **({"catchUp": False} if action == "resume" else {})},
    }


def test_submit_without_a_compiled_spec_says_to_compile_first(capsys, tmp_path):
    missing = tmp_path / "pipeline.json"
    argv = [
        "submit",
        "--config",
        str(own_project_config(tmp_path)),
        "--pipeline-json",
        str(missing),
    ]
    assert main([*argv, "--dry-run"]) == 1
    assert "tpu-pipeline compile --target vertex" in capsys.readouterr().err


def test_compile_command_writes_the_spec_and_names_the_image(capsys, tmp_path):
    output = tmp_path / "pipeline.json"
    argv = ["compile", "--target", "vertex", "--config", str(own_project_config(tmp_path))]
    assert main([*argv, "--output", str(output)]) == 0
    assert json.loads(output.read_text())["displayName"] == "tpu-pipeline-digits"
    assert f"{PROJECT}/tpu-pipeline/pipeline:0.1.0" in capsys.readouterr().out


def test_submit_dry_run_prints_what_a_person_checks_and_names_the_file_of_requests(
    capsys, own_spec, tmp_path
):
    lines, requests = _dry_run_lines(capsys, own_spec, tmp_path, "submit", "--train-steps", "50")
    _, spec, path = own_spec("cpu")
    image = spec["pipelineSpec"]["deploymentSpec"]["executors"]["Trainer_executor"]["container"]
    assert lines == [
        "submit --dry-run: nothing sent",
        f"  project          {PROJECT}",
        "  region           us-central1",
        f"  service account  {SERVICE_ACCOUNT}",
        f"  pipeline root    gs://{PROJECT}-tpu-pipeline/pipeline_root",
        f"  image            {image['image']}",
        f"  parameters       data_root=gs://{PROJECT}-tpu-pipeline/data/digits, "
        'train_args={"num_steps": 50}',
        "  calls            submit: PipelineService.CreatePipelineJob",
        f"  requests         {path.with_name('pipeline.submit-requests.json')} "
        "(each in full, in order)",
    ]
    assert requests["submit"]["request"]["pipelineJob"]["serviceAccount"] == SERVICE_ACCOUNT


def test_schedule_dry_run_prints_the_schedule_it_would_create(capsys, own_spec, tmp_path):
    lines, _ = _dry_run_lines(
        capsys,
        own_spec,
        tmp_path,
        "schedule",
        "create",
        "--cron",
        "0 4 * * *",
        "--set",
        "vertex.schedule.start_time=2027-01-04T00:00:00Z",
    )
    assert "  schedule         TZ=UTC 0 4 * * *, at most 1 run(s) at a time, from " in "\n".join(
        lines
    )
    assert len(lines) < 15  # the full requests (thousands of lines) are in the file


def test_a_dry_run_never_writes_over_a_file_of_the_users(capsys, own_spec, tmp_path):
    _, _, path = own_spec("cpu")
    mine = tmp_path / "requests.json"
    mine.write_text("my notes")
    argv = ["submit", "--config", str(own_project_config(tmp_path)), "--pipeline-json", str(path)]
    assert main([*argv, "--dry-run", "--requests", str(mine)]) == 2
    assert capsys.readouterr().out == ""
    assert mine.read_text() == "my notes"
