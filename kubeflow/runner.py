"""Compiles the pipeline for Vertex AI Pipelines / Kubeflow Pipelines v2.

The pipeline is the one `create_pipeline` builds for local runs. Only what a
cluster needs differs: `gs://` roots from `vertex:` config, the schema file as
a path inside our image, the Trainer as a custom job when configured, Beam on
Dataflow when configured, the Pusher that also registers models, and runtime
parameters a user sets per run (the data root and the train arguments).
"""

from __future__ import annotations

import os
import pathlib
from typing import TYPE_CHECKING, Any

from tpu_pipeline.common.config import PipelineConfig, require_vertex
from tpu_pipeline.kubeflow.cluster_config import (
    DATA_ROOT_PARAMETER,
    TRAIN_ARGS_PARAMETER,
    require_webhook_secret,
    runtime_parameter_defaults,
    vertex_pipeline_config,
)

if TYPE_CHECKING:  # TFX is imported inside the functions: `--help` stays fast
    from tpu_pipeline.common.tfx_api import tfx_pipeline
    from tpu_pipeline.pipeline.wiring.graph import ComponentOverrides


def vertex_overrides(config: PipelineConfig) -> ComponentOverrides:
    """Vertex's Trainer, Tuner, Pusher and runtime-parameter train arguments for `create_pipeline`.

    The Tuner always runs its trials as a custom job (on `vertex.trainer`'s machine
    spec), so they can run in parallel, whichever way the Trainer runs.
    """
    from tpu_pipeline.common.tfx_api import data_types
    from tpu_pipeline.pipeline.wiring.graph import ComponentOverrides

    vertex = config.vertex
    overrides: dict[str, Any] = {
        "train_args": data_types.RuntimeParameter(name=TRAIN_ARGS_PARAMETER, ptype=str),
        # Its resolver is a custom strategy; TFX 1.16's Vertex compiler runs only its own two.
        "check_label_drift": False,
    }
    if vertex.trainer.runs_on == "custom_job":
        from tpu_pipeline.kubeflow.custom_job import (
            custom_job_trainer_config,
            trainer_component_class,
        )

        overrides["trainer_class"] = trainer_component_class(vertex)
        overrides["trainer_custom_config"] = custom_job_trainer_config(config)
    if config.tuner.enabled:
        from tpu_pipeline.kubeflow.tuner_job import (
            RecordingVertexTuner,
            tune_args,
            tuner_job_custom_config,
        )

        overrides["tuner_class"] = RecordingVertexTuner
        overrides["tuner_custom_config"] = tuner_job_custom_config(config)
        overrides["tune_args"] = tune_args(config)
    if vertex.model_registry:
        from tpu_pipeline.serving_ops.vertex.pusher import RegistryPusher, registry_custom_config

        overrides["pusher_class"] = RegistryPusher
        overrides["pusher_custom_config"] = registry_custom_config(vertex)
    return ComponentOverrides(**overrides)


def build_vertex_pipeline(config: PipelineConfig) -> tfx_pipeline.Pipeline:
    """The TFX pipeline for Vertex AI, from the same `create_pipeline` as local runs."""
    from tpu_pipeline.common.tfx_api import data_types
    from tpu_pipeline.pipeline.wiring.graph import create_pipeline

    config = vertex_pipeline_config(config)
    vertex = config.vertex
    return create_pipeline(
        config,
        data_root=data_types.RuntimeParameter(name=DATA_ROOT_PARAMETER, ptype=str),
        pipeline_root=vertex.pipeline_root,
        serving_dir=vertex.serving_dir,
        overrides=vertex_overrides(config),
    )


def compile_pipeline(config: PipelineConfig, output: pathlib.Path) -> dict[str, Any]:
    """Writes the KFP v2 pipeline job spec (JSON) for `config` to `output` and returns it.

    `output` is new or a spec this command wrote (`common/owned_paths.py`); the runner
    writes into a scratch file that replaces it whole once compiled.

    Raises:
      UserPathError: `output` is a file of the user's (or a folder).
    """
    from tpu_pipeline.common.owned_paths import check_replaceable, owned_file

    vertex = require_vertex(config)
    require_webhook_secret(config)  # before the import of TFX: a config error takes a second
    check_replaceable(output, "--output")
    from tpu_pipeline.common.tfx_api import kubeflow_v2_dag_runner
    from tpu_pipeline.kubeflow.exit_handler import run_ended_handler

    with owned_file(output, "--output") as partial:
        runner = kubeflow_v2_dag_runner.KubeflowV2DagRunner(
            config=kubeflow_v2_dag_runner.KubeflowV2DagRunnerConfig(
                default_image=vertex.pipeline_image
            ),
            output_dir=os.path.dirname(partial),
            output_filename=os.path.basename(partial),
        )
        handler = run_ended_handler(config)
        if handler is not None:  # runs after the DAG, however it ended
            runner.set_exit_handler(handler)
        return runner.run(
            build_vertex_pipeline(config),
            parameter_values=runtime_parameter_defaults(config),
            write_out=True,
        )
