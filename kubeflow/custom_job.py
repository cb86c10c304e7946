"""Runs the Trainer as a Vertex AI custom training job on TPU, GPU or CPU machines.

TFX's Vertex Trainer starts a CustomJob whose container runs the same Trainer
executor (and so the same `run_fn`) as the pipeline step would, on the machine
the worker pool spec asks for. The job needs our package inside its image:
`kubeflow/Dockerfile` for CPU and GPU, `kubeflow/tpu.Dockerfile` for TPU VMs
(whose job passes the executor command as args: `kubeflow/tpu_job.py`).

With `vertex.trainer.spot` the job asks for Spot capacity (`Scheduling.strategy`
SPOT) and for the whole job to restart when a worker does
(`restart_job_on_worker_restart`): a preempted job starts over, and the Trainer
resumes from the last epoch BackupAndRestore wrote under the pipeline root in
Cloud Storage (`components/training/setup.py: backup_dir_for`).
"""

from __future__ import annotations

from typing import Any

from tpu_pipeline.common.config import PipelineConfig, TrainerConfig, VertexConfig
from tpu_pipeline.kubeflow.tpu_image import PJRT_ENV


def worker_pool_specs(vertex: VertexConfig) -> list[dict[str, Any]]:
    """The custom job's worker pools: machine, accelerator, image and replicas.

    Vertex AI's MachineSpec: `cloud-tpu` + TPU_V2/TPU_V3 x 8 for TPU v2-8/v3-8,
    a `ct5lp-hightpu-*` machine type for TPU v5e (with `tpu_topology`, a slice of
    one or several hosts), an NVIDIA accelerator with a count for GPUs, or a
    plain machine type for CPU. With `replica_count` > 1 the first pool is the
    chief and a second pool holds the other workers, on identical machines:
    Vertex AI then sets TF_CONFIG in each, and `run_fn` trains with
    MultiWorkerMirroredStrategy.
    """
    target = vertex.trainer
    machine_spec: dict[str, Any] = {"machine_type": target.machine_type}
    if target.accelerator_type:
        machine_spec["accelerator_type"] = target.accelerator_type
        machine_spec["accelerator_count"] = target.accelerator_count
    if target.tpu_topology:
        machine_spec["tpu_topology"] = target.tpu_topology
    # TFT and TFMA need Keras 2; the images set it too, this keeps an older image safe.
    env = {"TF_USE_LEGACY_KERAS": "1", **(PJRT_ENV if target.device == "tpu" else {})}
    pool = {
        "machine_spec": machine_spec,
        "replica_count": 1,
        "container_spec": {
            "image_uri": target.image or vertex.pipeline_image,
            "env": [{"name": name, "value": value} for name, value in env.items()],
        },
    }
    if target.replica_count == 1:
        return [pool]
    return [pool, {**pool, "replica_count": target.replica_count - 1}]


def trainer_config_for_job(config: PipelineConfig) -> TrainerConfig:
    """The Trainer settings `run_fn` gets inside the job: the device is known, not guessed.

    On a single-host TPU VM the chips are local to the job's host (`tpu_name:
    local`), so `run_fn` connects to them at once instead of probing; a slice of
    several hosts is found through the TPU environment Vertex AI sets. Asking
    for a GPU makes a job that landed without one fail instead of training on
    its CPU. The replicas and hosts the machine spec promises go along, so the
    Trainer stops instead of training on part of them (`replica_guard.py`).
    """
    device = config.vertex.trainer.device
    update: dict[str, Any] = {
        "accelerator": device,
        "promised_devices": config.vertex.trainer.promised_devices,
    }
    if device == "tpu" and config.vertex.trainer.hosts == 1:
        update["tpu_name"] = "local"
    return config.trainer.model_copy(update=update)


def custom_job_config(config: PipelineConfig, job_args_key: str) -> dict[str, Any]:
    """custom_config entries that make a TFX Vertex component start its custom job.

    The Trainer and the Tuner both run `run_fn`'s training in the job; they name
    the job's arguments under their own key (`job_args_key`).
    """
    from tpu_pipeline.common.tfx_api import ai_platform_constants

    vertex = config.vertex
    job_spec: dict[str, Any] = {"worker_pool_specs": worker_pool_specs(vertex)}
    if vertex.service_account:
        job_spec["service_account"] = vertex.service_account
    if vertex.trainer.spot:
        job_spec["scheduling"] = {"strategy": "SPOT", "restart_job_on_worker_restart": True}
    job_args: dict[str, Any] = {"project": vertex.project, "job_spec": job_spec}
    if vertex.labels:
        job_args["labels"] = dict(vertex.labels)
    return {
        "trainer": trainer_config_for_job(config).model_dump(mode="json"),
        ai_platform_constants.ENABLE_VERTEX_KEY: True,
        ai_platform_constants.VERTEX_REGION_KEY: vertex.region,
        job_args_key: job_args,
    }


def trainer_component_class(vertex: VertexConfig) -> type:
    """TFX's Vertex Trainer, or for TPU jobs the one whose job keeps the image's ENTRYPOINT."""
    if vertex.trainer.device == "tpu":
        from tpu_pipeline.kubeflow.tpu_job import TpuVertexTrainer

        return TpuVertexTrainer
    from tpu_pipeline.common.tfx_api import VertexTrainer

    return VertexTrainer


def custom_job_trainer_config(config: PipelineConfig) -> dict[str, Any]:
    """Trainer custom_config entries that make TFX's Vertex Trainer start the custom job."""
    from tpu_pipeline.common.tfx_api import ai_platform_trainer_executor

    return custom_job_config(config, ai_platform_trainer_executor.TRAINING_ARGS_KEY)
