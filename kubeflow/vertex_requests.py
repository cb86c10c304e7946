"""Builds the Vertex AI API requests for submitting and scheduling the compiled pipeline.

Building is offline: `aiplatform.PipelineJob` and `PipelineJobSchedule` turn the
compiled spec and our config into resources without calling Google Cloud. The
same request objects are printed by `--dry-run` and sent by `vertex_api`, so
what a dry run shows is exactly what a real run sends.
"""

from __future__ import annotations

import json
import pathlib
from typing import TYPE_CHECKING, Any

from google.protobuf import field_mask_pb2
from pydantic import TypeAdapter, ValidationError

from tpu_pipeline.common import vertex_types as gca
from tpu_pipeline.common.config import ConfigError, GcsUri, PipelineConfig, require_vertex
from tpu_pipeline.common.vertex_api import ApiCall
from tpu_pipeline.kubeflow.cluster_config import DATA_ROOT_PARAMETER, TRAIN_ARGS_PARAMETER

if TYPE_CHECKING:  # imported where a job is built: the SDK is slow to import
    from google.cloud import aiplatform

# Stands in for the schedule's resource name, which only the lookup finds.
FOUND_SCHEDULE = "<name of the schedule the lookup finds>"
SCHEDULE_FIELDS = (
    "cron",
    "max_concurrent_run_count",
    "start_time",
    "end_time",
    "create_pipeline_job_request",
)


def parameter_values(data_root: str | None, train_steps: int | None) -> dict[str, str]:
    """Runtime parameters to set for one job; unset ones keep the compiled defaults.

    Raises:
      ConfigError: `data_root` is not a gs:// URI: every machine of the job (each
        host of a TPU slice reads its own files) must reach it.
    """
    values = {}
    if data_root:
        try:
            TypeAdapter(GcsUri).validate_python(data_root)
        except ValidationError:
            raise ConfigError(
                f"--data-root {data_root!r}: a Vertex AI run reads its data from Cloud "
                "Storage; give a gs:// URI"
            ) from None
        values[DATA_ROOT_PARAMETER] = data_root
    if train_steps:
        values[TRAIN_ARGS_PARAMETER] = json.dumps({"num_steps": train_steps})
    return values


def pipeline_job(
    config: PipelineConfig,
    template: pathlib.Path,
    values: dict[str, str],
    credentials: Any,
) -> aiplatform.PipelineJob:
    """The PipelineJob for the compiled spec `template` (built offline)."""
    from google.cloud import aiplatform

    vertex = require_vertex(config)
    if not pathlib.Path(template).is_file():
        raise FileNotFoundError(
            f"{template}: no compiled pipeline; run `tpu-pipeline compile --target vertex` first"
        )
    return aiplatform.PipelineJob(
        display_name=config.full_pipeline_name,
        template_path=str(template),
        pipeline_root=vertex.pipeline_root,
        parameter_values=values,
        enable_caching=config.enable_cache,
        labels=dict(vertex.labels) or None,
        project=vertex.project,
        location=vertex.region,
        credentials=credentials,
    )


def parent(config: PipelineConfig) -> str:
    return require_vertex(config).location


def create_job_call(config: PipelineConfig, job: aiplatform.PipelineJob) -> ApiCall:
    """PipelineService.CreatePipelineJob for `job`, run as the configured service account."""
    resource = gca.PipelineJob(job._gca_resource)  # a copy: the SDK keeps the resource private
    if config.vertex.service_account:
        resource.service_account = config.vertex.service_account
    request = gca.CreatePipelineJobRequest(
        parent=parent(config), pipeline_job=resource, pipeline_job_id=job.job_id
    )
    return ApiCall("PipelineService.CreatePipelineJob", request)


def schedule_display_name(config: PipelineConfig) -> str:
    return require_vertex(config).schedule.display_name or config.full_pipeline_name


def schedule_resource(
    config: PipelineConfig, job: aiplatform.PipelineJob, cron: str | None, credentials: Any
) -> gca.Schedule:
    """The Schedule that starts `job` on the configured cron, in the configured time zone."""
    from google.cloud import aiplatform

    settings = require_vertex(config).schedule
    built = aiplatform.PipelineJobSchedule(
        pipeline_job=job, display_name=schedule_display_name(config), credentials=credentials
    )
    schedule = gca.Schedule(built._gca_resource)  # the SDK's own assembly of the job request
    schedule.cron = f"TZ={settings.time_zone} {cron or settings.cron}"
    schedule.max_concurrent_run_count = settings.max_concurrent_run_count
    if settings.start_time:
        schedule.start_time = settings.start_time
    if settings.end_time:
        schedule.end_time = settings.end_time
    if config.vertex.service_account:
        schedule.create_pipeline_job_request.pipeline_job.service_account = (
            config.vertex.service_account
        )
    return schedule


def find_schedule_call(config: PipelineConfig) -> ApiCall:
    """Lists the schedules with our display name: how create stays idempotent."""
    request = gca.ListSchedulesRequest(
        parent=parent(config), filter=f'display_name="{schedule_display_name(config)}"'
    )
    return ApiCall("ScheduleService.ListSchedules", request)


def list_schedules_call(config: PipelineConfig) -> ApiCall:
    return ApiCall("ScheduleService.ListSchedules", gca.ListSchedulesRequest(parent=parent(config)))


def create_schedule_call(config: PipelineConfig, schedule: gca.Schedule) -> ApiCall:
    request = gca.CreateScheduleRequest(parent=parent(config), schedule=schedule)
    return ApiCall("ScheduleService.CreateSchedule", request)


def update_schedule_call(schedule: gca.Schedule, name: str) -> ApiCall:
    """Replaces cron, limits, start/end and the pipeline job of the schedule `name`."""
    schedule = gca.Schedule(schedule)
    schedule.name = name
    paths = [field for field in SCHEDULE_FIELDS if field in schedule]
    request = gca.UpdateScheduleRequest(
        schedule=schedule, update_mask=field_mask_pb2.FieldMask(paths=paths)
    )
    return ApiCall("ScheduleService.UpdateSchedule", request)


def named_schedule_call(action: str, name: str) -> ApiCall:
    """Pause, resume or delete the schedule `name`."""
    requests = {
        "pause": ("PauseSchedule", gca.PauseScheduleRequest),
        "resume": ("ResumeSchedule", gca.ResumeScheduleRequest),
        "delete": ("DeleteSchedule", gca.DeleteScheduleRequest),
    }
    method, request_type = requests[action]
    return ApiCall(f"ScheduleService.{method}", request_type(name=name))
