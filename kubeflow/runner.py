"""Compiles the pipeline for Vertex AI Pipelines / Kubeflow Pipelines v2.

The pipeline is the one `create_pipeline` builds for local runs. Only what a
cluster needs differs: `gs://` roots from `vertex:` config, the schema file as
a path inside our image, the Trainer as a custom job when configured, Beam on
Dataflow when configured, the Pusher that also registers models, and runtime
parameters a user sets per run (the data root and the train arguments).
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import TYPE_CHECKING, Any

from tpu_pipeline.common.config import (
    REPO_ROOT,
    ConfigError,
    NotifyConfig,
    PipelineConfig,
    VertexConfig,
    require_vertex,
)

if TYPE_CHECKING:  # TFX is imported inside the functions: `--help` stays fast
    from tpu_pipeline.common.tfx_api import tfx_pipeline
    from tpu_pipeline.pipeline.wiring.graph import ComponentOverrides

# kubeflow/Dockerfile copies the repository here; user code and schemas are read from it.
CONTAINER_SOURCE_DIR = "/pipeline"
DATA_ROOT_PARAMETER = "data_root"
TRAIN_ARGS_PARAMETER = "train_args"


def require_webhook_secret(config: PipelineConfig) -> NotifyConfig | None:
    """The `notify:` section for Vertex AI, where the webhook URL must come from Secret Manager.

    A compiled spec's parameters, the job's and its schedule's, are shown to whoever can
    view the job; the URL stays out of them, read by the exit handler when it posts.

    Raises:
      ConfigError: `notify.webhook` (the URL itself) is set.
    """
    notify = config.notify
    if notify is not None and notify.webhook is not None:
        raise ConfigError(
            "notify.webhook: on Vertex AI the URL would be a pipeline parameter that whoever "
            "can view the job reads; store it in Secret Manager and set notify.webhook_secret: "
            "projects/PROJECT/secrets/SECRET/versions/VERSION instead (README: Notify)"
        )
    return notify


def container_schema_file(config: PipelineConfig) -> str:
    """The curated schema's path inside the pipeline image (or its gs:// URI)."""
    schema = config.dataset.schema_file
    if schema and schema.startswith("gs://"):
        return schema
    local = config.dataset.resolved_schema_file.resolve()
    if not local.is_relative_to(REPO_ROOT):
        raise ConfigError(
            f"dataset.schema_file: {local} is not in the image; put it under schemas/ "
            "(copied into the image) or give a gs:// URI"
        )
    return f"{CONTAINER_SOURCE_DIR}/{local.relative_to(REPO_ROOT).as_posix()}"


def dataflow_beam_args(vertex: VertexConfig) -> list[str]:
    """Beam flags that run the Beam components on Dataflow, in our own image.

    The pipeline image is the Dataflow SDK container, so the workers have TFX
    and this package without TFX building and uploading a source package.
    """
    dataflow = vertex.dataflow
    args = [
        "--runner=DataflowRunner",
        f"--project={vertex.project}",
        f"--region={vertex.region}",
        f"--temp_location={dataflow.temp_location}",
        f"--sdk_container_image={vertex.pipeline_image}",
        "--experiments=use_runner_v2",
        f"--max_num_workers={dataflow.max_num_workers}",
    ]
    if dataflow.machine_type:
        args.append(f"--machine_type={dataflow.machine_type}")
    if vertex.service_account:
        args.append(f"--service_account_email={vertex.service_account}")
    return args


def vertex_pipeline_config(config: PipelineConfig) -> PipelineConfig:
    """The run's config as the cluster sees it: data and schema where the cluster finds them."""
    vertex = require_vertex(config)
    dataset = config.dataset.model_copy(
        update={"data_dir": vertex.data_root, "schema_file": container_schema_file(config)}
    )
    beam_args = dataflow_beam_args(vertex) if vertex.dataflow else config.beam_pipeline_args
    return config.model_copy(update={"dataset": dataset, "beam_pipeline_args": beam_args})


def runtime_parameter_defaults(config: PipelineConfig) -> dict[str, str]:
    """Values of the runtime parameters a run uses unless the job sets its own."""
    return {
        DATA_ROOT_PARAMETER: require_vertex(config).data_root,
        # No num_steps: the Trainer runs `epochs` passes over the training data.
        TRAIN_ARGS_PARAMETER: json.dumps(
            {"num_steps": config.trainer.train_steps} if config.trainer.train_steps else {}
        ),
    }


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
