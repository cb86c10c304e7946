"""The pipeline's configuration as a Vertex AI run sees it, and the parameters a run sets.

Read by what compiles the pipeline (`runner.py`), by the requests sent to Vertex AI
(`vertex_requests.py`) and by the exit handler inside the run (`exit_handler.py`); kept
apart from the compiler so those import it without importing each other.
"""

from __future__ import annotations

import json

from tpu_pipeline.common.config import (
    REPO_ROOT,
    ConfigError,
    NotifyConfig,
    PipelineConfig,
    VertexConfig,
    require_vertex,
)

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
