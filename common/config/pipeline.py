"""The whole run: names and output folders, holding one of each section."""

from __future__ import annotations

import pathlib
from typing import Any

from pydantic import Field, model_validator

from tpu_pipeline.common.config.base import ConfigError, _Section
from tpu_pipeline.common.config.dataset import BUILTIN_DATASETS, DEFAULT_DATASET, DatasetConfig
from tpu_pipeline.common.config.drift import DriftConfig
from tpu_pipeline.common.config.evaluator import PHOTO_SLICE_KINDS, EvaluatorConfig
from tpu_pipeline.common.config.explain import ExplainConfig
from tpu_pipeline.common.config.notify import NotifyConfig
from tpu_pipeline.common.config.secrets import plain_credentials
from tpu_pipeline.common.config.serving import ServingConfig
from tpu_pipeline.common.config.tracking import TrackingConfig
from tpu_pipeline.common.config.trainer import TrainerConfig
from tpu_pipeline.common.config.tuner import TunerConfig
from tpu_pipeline.common.config.vertex import VertexConfig

# What photos (stored encoded) train when `trainer.model` is not set: on 64x64 hand photos the
# default cnn_bn diverged at the default rate (its wide Dense layer) where ResNet-20 learned.
PHOTO_DEFAULT_MODEL = "resnet20"
# Photos with no dataset.image_shape: a run chooses the size from the photos and the model
# (pipeline/wiring/recipe.py); where nothing looks at them first (compiling for Vertex AI),
# ImageNet's.
PHOTO_DEFAULT_IMAGE_SHAPE = (224, 224, 3)


def _is_photos(dataset: dict[str, Any]) -> bool:
    source = dataset.get("source") or {}
    encoded = isinstance(source, dict) and source.get("pixel_encoding") == "image"
    return dataset.get("format") == "image_folder" or (
        dataset.get("format", "tfrecord") == "tfrecord" and encoded
    )


def _photo_model_default(dataset: Any, values: dict[str, Any]) -> Any:
    """The trainer section, with `model: resnet20` if the dataset is photos and none is named."""
    trainer = values.get("trainer", {})
    if not isinstance(dataset, dict) or not isinstance(trainer, dict) or "model" in trainer:
        return trainer
    return {**trainer, "model": PHOTO_DEFAULT_MODEL} if _is_photos(dataset) else trainer


class PipelineConfig(_Section):
    """A whole run: names, output folder, dataset, Trainer and Evaluator."""

    pipeline_name: str = Field(default="tpu-pipeline", pattern=r"^[a-z0-9][a-z0-9-]*$")
    output_dir: str = "output"
    dataset: DatasetConfig = Field(
        default_factory=lambda: DatasetConfig(**BUILTIN_DATASETS[DEFAULT_DATASET])
    )
    trainer: TrainerConfig = TrainerConfig()
    tuner: TunerConfig = TunerConfig()
    evaluator: EvaluatorConfig = EvaluatorConfig()
    serving: ServingConfig = ServingConfig()
    drift: DriftConfig = DriftConfig()
    explain: ExplainConfig = ExplainConfig()
    enable_cache: bool = True
    beam_pipeline_args: list[str] = Field(
        default_factory=list,
        description="Extra Beam flags; any makes TFX package the code per Beam component",
    )
    vertex: VertexConfig | None = Field(
        default=None, description="Vertex AI Pipelines settings, read by compile/submit/schedule"
    )
    notify: NotifyConfig | None = Field(
        default=None, description="a webhook told each run's outcome (local and Vertex)"
    )
    tracking: TrackingConfig = Field(
        default_factory=TrackingConfig,
        description="experiment trackers each run is logged to (MLflow, Vertex AI Experiments)",
    )

    @model_validator(mode="after")
    def _crops_need_photos(self) -> PipelineConfig:
        if self.trainer.random_crop_area is not None and not self.dataset.stores_encoded_images:
            raise ValueError(
                "trainer.random_crop_area crops photos stored encoded (image folders, TFRecords "
                f"of PNG/JPEG); dataset {self.dataset.name!r} holds pixel values: use "
                "trainer.random_shift"
            )
        return self

    @model_validator(mode="after")
    def _photo_slices_need_photos(self) -> PipelineConfig:
        photo_kinds = [
            kind for kind in self.evaluator.slice_accuracy_lower_bounds if kind in PHOTO_SLICE_KINDS
        ]
        if photo_kinds and not self.dataset.stores_encoded_images:
            raise ValueError(
                f"evaluator.slice_accuracy_lower_bounds: {', '.join(photo_kinds)} slices are "
                "the stored photos' formats and sizes; dataset "
                f"{self.dataset.name!r} holds pixel values: bound class slices only"
            )
        if "span" in self.evaluator.slice_accuracy_lower_bounds and not self.dataset.mixes_spans:
            raise ValueError(
                "evaluator.slice_accuracy_lower_bounds: span slices are the spans of a run "
                "that reads several ({SPAN} in dataset.file_pattern and dataset.span_window "
                f"above 1); dataset {self.dataset.name!r} reads "
                + ("one span a run" if self.dataset.reads_spans else "no spans")
            )
        folder_bound = "source_folder" in self.evaluator.slice_accuracy_lower_bounds
        if folder_bound and not self.dataset.source_folder_slices:
            raise ValueError(
                "evaluator.slice_accuracy_lower_bounds: source_folder slices need "
                "dataset.source_folder_slices: true (ExampleGen records the folders then)"
            )
        return self

    @model_validator(mode="after")
    def _pruned_variant_needs_pruning(self) -> PipelineConfig:
        if "pruned" in self.serving.tflite_variants and self.trainer.pruning is None:
            raise ValueError(
                "serving.tflite_variants: the pruned variant stores the zeros trainer.pruning "
                "makes; set trainer.pruning (target_sparsity) or drop pruned"
            )
        return self

    @model_validator(mode="after")
    def _credentials_only_in_secret_fields(self) -> PipelineConfig:
        # The dump shows what every report and spec would: a SecretUrl as its host only.
        problem = plain_credentials(self.model_dump(mode="json"))
        if problem:
            raise ValueError(problem)
        return self

    @model_validator(mode="before")
    @classmethod
    def _expand_builtin_dataset(cls, values: Any) -> Any:
        """Let `dataset: mnist` (or a mapping naming a built-in) stand for its full entry.

        A mapping without a name overrides fields of the default dataset (digits).
        Photos get their own default model, and a default image shape.
        """
        if not isinstance(values, dict) or "dataset" not in values:
            return values
        dataset = values["dataset"]
        if isinstance(dataset, str):
            if dataset not in BUILTIN_DATASETS:
                raise ValueError(
                    f"dataset: unknown built-in {dataset!r}; "
                    f"allowed: {', '.join(BUILTIN_DATASETS)} or a mapping of dataset fields"
                )
            dataset = {"name": dataset}
        if isinstance(dataset, dict) and "name" not in dataset:
            dataset = {"name": DEFAULT_DATASET, **dataset}
        if isinstance(dataset, dict) and dataset.get("name") in BUILTIN_DATASETS:
            builtin = BUILTIN_DATASETS[dataset["name"]]
            if "split_patterns" in dataset:  # they name the files the built-in pattern would
                builtin = {key: value for key, value in builtin.items() if key != "file_pattern"}
            dataset = {**builtin, **dataset}
        if isinstance(dataset, dict) and _is_photos(dataset) and "image_shape" not in dataset:
            dataset = {**dataset, "image_shape": PHOTO_DEFAULT_IMAGE_SHAPE}
        return {**values, "dataset": dataset, "trainer": _photo_model_default(dataset, values)}

    @property
    def run_dir(self) -> pathlib.Path:
        """One folder per pipeline and dataset, holding everything the run writes."""
        return pathlib.Path(self.output_dir).resolve() / f"{self.pipeline_name}-{self.dataset.name}"

    @property
    def pipeline_root(self) -> pathlib.Path:
        return self.run_dir / "pipeline_root"

    @property
    def metadata_path(self) -> pathlib.Path:
        return self.run_dir / "metadata.sqlite"

    @property
    def serving_dir(self) -> pathlib.Path:
        return self.run_dir / "serving_model"

    @property
    def full_pipeline_name(self) -> str:
        return f"{self.pipeline_name}-{self.dataset.name}"


def require_vertex(config: PipelineConfig) -> VertexConfig:
    """Returns the `vertex:` section, or says how to add one."""
    if config.vertex is None:
        raise ConfigError(
            "vertex: section missing; start from kubeflow/vertex-cpu.yaml, vertex-gpu.yaml "
            "or vertex-tpu.yaml and set project, roots and images"
        )
    return config.vertex
