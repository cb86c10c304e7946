"""The ServingPackager TFX runs after the Trainer: the model as it is served, and its measurements.

TFX keeps jobs apart: the Trainer trains and exports, and what is made from the trained
model is a step of its own, cached, timed and switched apart (`serving.package`). This
one reads the Trainer's SavedModel and writes the served model into a Model of its own
(`components/serving/model_folder.py`): the SavedModel, temperature-scaled when
`serving.temperature_scaling` asks and it helps, the drift reference `predict` compares
its input with, and the TFLite variants, each measured against the SavedModel. As TFX's
InfraValidator with `make_warmup` hands the Pusher a copy of the model with more in it,
this Model is what the Evaluator judges and the Pusher publishes: the served model is the
evaluated one. The function below is the component's spec and its executor both.
TFX names the executor by this module's path in compiled pipelines, so it stays here.
"""

import json

import tensorflow_transform as tft

from tpu_pipeline.common.tfx_api import (
    InputArtifact,
    OutputArtifact,
    Parameter,
    artifact_utils,
    component,
    io_utils,
    path_utils,
)
from tpu_pipeline.common.tfx_api import standard_artifacts as artifacts
from tpu_pipeline.components.contract import read_dataset, read_serving
from tpu_pipeline.components.serving.model_folder import package_model


@component
def ServingPackager(  # noqa: N802 (TFX names components in CamelCase)
    model: InputArtifact[artifacts.Model],
    examples: InputArtifact[artifacts.Examples],
    transform_graph: InputArtifact[artifacts.TransformGraph],
    served_model: OutputArtifact[artifacts.Model],
    custom_config: Parameter[str],
) -> None:
    """Writes the served model made from the Trainer's `model` into `served_model`.

    `custom_config` is `contract.packager_sections` as JSON: the dataset and the
    `serving` section (which variants, how many eval examples, temperature scaling).
    """
    config = json.loads(custom_config)
    package_model(
        path_utils.serving_model_path(model.uri),
        path_utils.serving_model_dir(served_model.uri),
        tft.TFTransformOutput(transform_graph.uri),
        read_dataset(config),
        read_serving(config),
        train_files=split_files(examples, "train"),
        eval_files=split_files(examples, "eval"),
    )


def split_files(examples: artifacts.Examples, split: str) -> list[str]:
    """The file pattern of one split of ExampleGen's output, as TFX gives the Trainer its own."""
    return [io_utils.all_files_pattern(artifact_utils.get_split_uri([examples], split))]
