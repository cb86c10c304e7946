"""The TPU Trainer's custom job: TFX's, with its executor command passed as `args`.

TFX 1.16's Vertex client (`training_clients.VertexJobClient.create_training_job`)
sets every worker pool's `container_spec.command` to
`python -m tfx.scripts.run_executor --executor_class_path ... --inputs ...`,
overriding any command given. A container's `command` replaces the image's
ENTRYPOINT, and Vertex AI's TPU pod base image sets up the slice in its
ENTRYPOINT and then runs the container's CMD/args. So for TPU jobs the same
executor command line goes into `args` instead, and `command` stays unset: the
base image starts, then runs TFX's executor, which runs our `run_fn`.
"""

from __future__ import annotations

from typing import Any

from tpu_pipeline.common.tfx_api import (
    VertexTrainer,
    ai_platform_constants,
    ai_platform_runner,
    ai_platform_trainer_executor,
    ai_platform_training_clients,
    executor_spec,
    json_utils,
    name_utils,
    standard_component_specs,
    tfx_trainer_executor,
)


def command_as_args(custom_job: dict[str, Any]) -> dict[str, Any]:
    """Moves each worker pool's container `command` to its `args`, in place; returns the job."""
    for pool in custom_job["job_spec"]["worker_pool_specs"]:
        container = pool["container_spec"]
        container["args"] = container.pop("command") + container.get("args", [])
    return custom_job


def tpu_custom_job(
    input_dict: dict[str, list],
    output_dict: dict[str, list],
    exec_properties: dict[str, Any],
    client_class: type = ai_platform_training_clients.VertexJobClient,
) -> tuple[str, str, dict[str, Any]]:
    """The project, region and CustomJob TFX would submit, with the command as args.

    `client_class` is TFX's Vertex client; its constructor opens an API client,
    which a test without credentials replaces.
    """
    custom_config = json_utils.loads(exec_properties[standard_component_specs.CUSTOM_CONFIG_KEY])
    job_args = dict(custom_config[ai_platform_trainer_executor.TRAINING_ARGS_KEY])
    project = job_args.pop("project")
    region = custom_config[ai_platform_constants.VERTEX_REGION_KEY]
    custom_job = client_class(region).create_training_job(
        input_dict,
        output_dict,
        exec_properties,
        name_utils.get_full_name(tfx_trainer_executor.GenericExecutor),
        job_args,
        None,
        None,
    )
    return project, region, command_as_args(custom_job)


class PodEntrypointTrainerExecutor(ai_platform_trainer_executor.GenericExecutor):
    """TFX's Vertex Trainer executor, starting the job so the image's ENTRYPOINT runs."""

    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802 (TFX's name)
        self._log_startup(input_dict, output_dict, exec_properties)
        project, region, custom_job = tpu_custom_job(input_dict, output_dict, exec_properties)
        # TFX's own launch-and-wait loop, the one its executor calls through start_cloud_training.
        ai_platform_runner._launch_cloud_training(
            project=project, training_job=custom_job, enable_vertex=True, vertex_region=region
        )


class TpuVertexTrainer(VertexTrainer):
    """TFX's Vertex AI Trainer component, run by `PodEntrypointTrainerExecutor`."""

    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(PodEntrypointTrainerExecutor)
