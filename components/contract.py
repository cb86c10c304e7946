"""The contract between the pipeline's wiring and the code TFX calls.

The pipeline (`pipeline/`) writes configuration sections into each component's
`custom_config`; Transform, the Trainer, the Tuner, the ServingPackager, the Explainer,
the Evaluator, the Pusher and the report read them back. The feature keys Transform
writes are the ones the Trainer, the models and the serving signatures read. Both
sides use this module, so a key or a section cannot be spelled two ways, and a reader
does not import the Trainer just to parse its configuration.
"""

from __future__ import annotations

from typing import Any

from tpu_pipeline.common.config import (
    DatasetConfig,
    EvaluatorConfig,
    ExplainConfig,
    PipelineConfig,
    ServingConfig,
    TrainerConfig,
    TunerConfig,
)

# The features `preprocessing_fn` outputs: the model's input image and the label.
IMAGE_KEY = "image"
LABEL_KEY = "label"

# What ExampleGen writes beside each encoded photo, for StatisticsGen and the schema:
# the stored image's height and width in pixels and its format (jpeg, png, gif, bmp).
IMAGE_HEIGHT_FEATURE = "image_height"
IMAGE_WIDTH_FEATURE = "image_width"
IMAGE_FORMAT_FEATURE = "image_format"
# What ExampleGen writes on every example when a run reads several spans
# (`dataset.span_window` > 1): the span the example came from, which the Evaluator slices by.
SPAN_FEATURE = "span"
# With `dataset.source_folder_slices`: the folder each example's file is in, below data_dir
# and without the span and class folders ("." for files directly in it).
SOURCE_FOLDER_FEATURE = "source_folder"

# The sections of a custom_config (plain JSON values of the typed configuration).
DATASET_SECTION = "dataset"
TRAINER_SECTION = "trainer"
SERVING_SECTION = "serving"
EXPLAIN_SECTION = "explain"
EVALUATOR_SECTION = "evaluator"
TUNER_SECTION = "tuner"
# A fingerprint of the code, so editing it reruns the component instead of hitting the cache.
CODE_VERSION_KEY = "code_version"
# The Trainer's one setting of the `explain` section: the layer whose feature maps its
# export keeps for Grad-CAM (`explain.grad_cam_layer`; null: the last with feature maps).
GRAD_CAM_LAYER_KEY = "grad_cam_layer"
# The Evaluator's: how many eval examples the judged model answers one by one (`runs diff`).
OUTCOME_EXAMPLES_KEY = "eval_outcome_examples"


def component_sections(config: PipelineConfig, code_version: str) -> dict[str, Any]:
    """What Transform, the Trainer and the Tuner all read: the dataset and Trainer sections."""
    return {
        DATASET_SECTION: config.dataset.model_dump(mode="json"),
        TRAINER_SECTION: config.trainer.model_dump(mode="json"),
        CODE_VERSION_KEY: code_version,
    }


def trainer_sections(config: PipelineConfig, code_version: str) -> dict[str, Any]:
    """The Trainer's: the shared sections, and the layer its export keeps for Grad-CAM.

    The `serving` and `explain` sections are the steps' after it (`packager_sections`,
    `explainer_sections`): changing the TFLite variants or the attributions reruns
    those steps, not the training.
    """
    return {
        **component_sections(config, code_version),
        GRAD_CAM_LAYER_KEY: config.explain.grad_cam_layer,
    }


def packager_sections(config: PipelineConfig, code_version: str) -> dict[str, Any]:
    """The ServingPackager's: the dataset, and the `serving` section it packages by."""
    return {
        DATASET_SECTION: config.dataset.model_dump(mode="json"),
        SERVING_SECTION: config.serving.model_dump(mode="json"),
        CODE_VERSION_KEY: code_version,
    }


def explainer_sections(config: PipelineConfig, code_version: str) -> dict[str, Any]:
    """The Explainer's: the dataset, and the `explain` section it explains by."""
    return {
        DATASET_SECTION: config.dataset.model_dump(mode="json"),
        EXPLAIN_SECTION: config.explain.model_dump(mode="json"),
        CODE_VERSION_KEY: code_version,
    }


def pusher_sections(config: PipelineConfig) -> dict[str, Any]:
    """The Pusher's: the serving check's time budget and the number of classes it expects,
    and the slice rule the model card flags slices by."""
    return {
        DATASET_SECTION: config.dataset.model_dump(mode="json"),
        SERVING_SECTION: config.serving.model_dump(mode="json"),
        EVALUATOR_SECTION: config.evaluator.model_dump(mode="json"),
    }


def evaluator_sections(config: PipelineConfig) -> dict[str, Any]:
    """The Evaluator's: the rules it judges TFMA's figures by, the class names its
    verdict names slices with, and how many eval examples' outcomes it keeps."""
    return {
        DATASET_SECTION: config.dataset.model_dump(mode="json"),
        EVALUATOR_SECTION: config.evaluator.model_dump(mode="json"),
        OUTCOME_EXAMPLES_KEY: config.serving.measured_examples,
    }


def tuner_sections(config: PipelineConfig, code_version: str) -> dict[str, Any]:
    """The Tuner's: the shared sections and the search itself."""
    return {
        **component_sections(config, code_version),
        TUNER_SECTION: config.tuner.model_dump(mode="json"),
    }


def read_dataset(custom_config: dict[str, Any]) -> DatasetConfig:
    """The dataset section, validated again (a custom_config is plain JSON)."""
    return DatasetConfig.model_validate(custom_config[DATASET_SECTION])


def read_evaluator(custom_config: dict[str, Any]) -> EvaluatorConfig:
    """The evaluator section."""
    return EvaluatorConfig.model_validate(custom_config[EVALUATOR_SECTION])


def read_trainer(custom_config: dict[str, Any]) -> TrainerConfig:
    """The Trainer section."""
    return TrainerConfig.model_validate(custom_config[TRAINER_SECTION])


def read_serving(custom_config: dict[str, Any]) -> ServingConfig:
    """The serving section (the ServingPackager's and the Pusher's custom_config)."""
    return ServingConfig.model_validate(custom_config[SERVING_SECTION])


def read_explain(custom_config: dict[str, Any]) -> ExplainConfig:
    """The attribution step's section (the Explainer's custom_config only)."""
    return ExplainConfig.model_validate(custom_config[EXPLAIN_SECTION])


def read_tuner(custom_config: dict[str, Any]) -> TunerConfig:
    """The search (the Tuner's custom_config only)."""
    return TunerConfig.model_validate(custom_config[TUNER_SECTION])
