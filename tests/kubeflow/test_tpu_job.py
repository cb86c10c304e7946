"""The TPU custom job, as TFX 1.16 would submit it, read back through the Vertex AI SDK's types.

TFX's own Vertex client builds the job from the compiled spec's custom_config;
only its API client (which needs credentials) is left out. The result is parsed
by `google.cloud.aiplatform_v1.CustomJob`, so a field Vertex would reject fails here.
"""

from __future__ import annotations

import json

import pytest

from tests.kubeflow.conftest import DEPLOYMENT_CONFIGS, executor, task_parameter
from tpu_pipeline.common import vertex_types as gca
from tpu_pipeline.common.config import load_config
from tpu_pipeline.kubeflow.tpu_image import PJRT_ENV
from tpu_pipeline.kubeflow.vertex_requests import parameter_values

TFX_EXECUTOR_COMMAND = ["python", "-m", "tfx.scripts.run_executor"]


def submitted_job(spec: dict) -> gca.CustomJob:
    # Imported here: TFX's Vertex extension imports the Vertex SDK, which collecting need not.
    from tpu_pipeline.common.tfx_api import ai_platform_training_clients
    from tpu_pipeline.kubeflow.tpu_job import tpu_custom_job

    class OfflineVertexJobClient(ai_platform_training_clients.VertexJobClient):
        """TFX's Vertex client without its API connection: building the job needs none."""

        def create_client(self) -> None:
            self._client = None

    custom_config = task_parameter(spec, "Trainer", "custom_config")
    exec_properties = {"custom_config": json.dumps(custom_config)}
    _, _, job = tpu_custom_job({}, {}, exec_properties, client_class=OfflineVertexJobClient)
    return gca.CustomJob(job)


@pytest.mark.parametrize("target", ["tpu-multihost", "tpu-spot"])
def test_tpu_job_is_one_pool_of_one_replica_whose_image_entrypoint_runs_tfxs_executor(
    compile_spec, target
):
    config, spec, _ = compile_spec(target)
    job = submitted_job(spec)
    (pool,) = job.job_spec.worker_pool_specs
    assert pool.replica_count == 1
    assert pool.machine_spec.machine_type == "ct5lp-hightpu-4t"
    assert pool.machine_spec.tpu_topology == config.vertex.trainer.tpu_topology
    container = pool.container_spec
    assert container.image_uri == config.vertex.trainer.image
    # No command: the pod base image's ENTRYPOINT runs, then these args (TFX's command line).
    assert list(container.command) == []
    assert list(container.args[:3]) == TFX_EXECUTOR_COMMAND
    path = list(container.args).index("--executor_class_path")
    assert container.args[path + 1] == "tfx.components.trainer.executor.GenericExecutor"
    assert {env.name: env.value for env in container.env}.items() >= PJRT_ENV.items()


def test_spot_job_asks_for_spot_capacity_and_restarts_as_a_whole(compile_spec):
    _, spec, _ = compile_spec("tpu-spot")
    scheduling = submitted_job(spec).job_spec.scheduling
    assert scheduling.strategy == gca.Scheduling.Strategy.SPOT
    assert scheduling.restart_job_on_worker_restart


def test_on_demand_job_leaves_scheduling_to_vertex(compile_spec):
    _, spec, _ = compile_spec("tpu-multihost")
    scheduling = submitted_job(spec).job_spec.scheduling
    assert scheduling.strategy == gca.Scheduling.Strategy.STRATEGY_UNSPECIFIED


def test_multi_host_trainer_is_promised_the_whole_slice_and_runs_our_executor(compile_spec):
    _, spec, _ = compile_spec("tpu-multihost")
    trainer = task_parameter(spec, "Trainer", "custom_config")["trainer"]
    assert trainer["promised_devices"] == {
        "replicas": 16,
        "hosts": 4,
        "machine": "ct5lp-hightpu-4t x tpu_topology 4x4",
    }
    args = executor(spec, "Trainer")["args"]
    assert args[args.index("--executor_class_path") + 1] == (
        "tpu_pipeline.kubeflow.tpu_job.PodEntrypointTrainerExecutor"
    )


def test_per_host_input_needs_cloud_storage_roots_naming_the_field(tmp_path):
    # Every host of a slice reads its own shard itself: a local path exists on none of them.
    for field in ("vertex.data_root", "vertex.pipeline_root"):
        with pytest.raises(ValueError, match=field.replace(".", r"\.")):
            load_config(str(DEPLOYMENT_CONFIGS["tpu-multihost"]), {field: str(tmp_path)})


def test_per_host_input_root_given_at_submit_must_be_cloud_storage(tmp_path):
    with pytest.raises(ValueError, match="--data-root .*give a gs:// URI"):
        parameter_values(str(tmp_path), None)
    assert parameter_values("gs://bucket/data", None) == {"data_root": "gs://bucket/data"}
