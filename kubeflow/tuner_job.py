"""Runs the Tuner's trials on Vertex AI: parallel custom-job workers on the Trainer's machines.

TFX's Vertex tuner extension starts one CustomJob whose workers each run
KerasTuner's search loop against one chief oracle, so `tuner.num_parallel_trials`
trials run at once. Every worker has the Trainer's machine spec and image
(`vertex.trainer`: TPU, GPU or CPU), so trials measure the hardware the Trainer
will use. Our executor only adds where trials write their records (the Tuner's
output on Cloud Storage), as the local Tuner does.
"""

from __future__ import annotations

from typing import Any

from tpu_pipeline.common.config import PipelineConfig
from tpu_pipeline.common.tfx_api import (
    VertexTuner,
    ai_platform_tuner_executor,
    executor_spec,
    tuner_pb2,
)
from tpu_pipeline.components.tuner import TrialsDirMixin
from tpu_pipeline.kubeflow.custom_job import custom_job_config


class VertexTrialRecordingExecutor(TrialsDirMixin, ai_platform_tuner_executor.Executor):
    """TFX's Vertex tuner executor, with `trials_dir` in the custom_config its workers get."""


class RecordingVertexTuner(VertexTuner):
    """TFX's Vertex AI Tuner component, run by `VertexTrialRecordingExecutor`."""

    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(VertexTrialRecordingExecutor)


def tuner_job_custom_config(config: PipelineConfig) -> dict[str, Any]:
    """Tuner custom_config entries: the job's workers, on the Trainer's machine spec.

    Each worker runs its own trials on its own machine, not one strategy over all
    of them, so the Trainer's promise of replicas across machines does not apply.
    """
    custom_config = custom_job_config(config, ai_platform_tuner_executor.TUNING_ARGS_KEY)
    custom_config["trainer"]["promised_devices"] = None
    return custom_config


def tune_args(config: PipelineConfig) -> tuner_pb2.TuneArgs:
    """How many trials run at once: one per worker of the job."""
    return tuner_pb2.TuneArgs(num_parallel_trials=config.tuner.num_parallel_trials)
