"""The one typed, validated configuration of a tpu-pipeline run.

Everything a run can change lives here: the dataset, the Trainer's device and
model choices, the Evaluator's thresholds and where outputs go. A YAML file and
command-line flags both feed `load_config`, and every error names the field that
is wrong and what is allowed, so a typo fails in a second instead of an hour
into a TPU job.
"""

from __future__ import annotations

import pathlib
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED_DATA_DIR = REPO_ROOT.parent / "shared" / "data"


class ConfigError(ValueError):
    """A configuration file or flag holds a value that is not allowed."""


class _Section(BaseModel):
    # Unknown keys are typos: reject them instead of silently ignoring them.
    model_config = ConfigDict(extra="forbid", frozen=True)


class DatasetConfig(_Section):
    """Where the raw examples are and how to read them.

    The data is a folder of TFRecord files of `tf.train.Example`, each holding a
    flat float list of pixels (row-major, channels last) and an int64 label.
    """

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    data_dir: str | None = Field(
        default=None, description="Folder of TFRecord files; built-in datasets fill it in."
    )
    file_pattern: str = "*.tfrecord*"
    image_shape: tuple[int, int, int] = Field(description="height, width, channels")
    pixel_feature: str
    label_feature: str
    num_classes: int = Field(ge=2)
    schema_file: str | None = Field(
        default=None, description="Curated schema; defaults to schemas/<name>/schema.pbtxt."
    )
    eval_percent: int = Field(default=20, ge=1, le=50)

    @model_validator(mode="after")
    def _positive_shape(self) -> DatasetConfig:
        if any(dim < 1 for dim in self.image_shape):
            raise ValueError(f"image_shape must be positive, got {self.image_shape}")
        return self

    @property
    def pixel_count(self) -> int:
        height, width, channels = self.image_shape
        return height * width * channels

    @property
    def resolved_schema_file(self) -> pathlib.Path:
        if self.schema_file:
            return pathlib.Path(self.schema_file)
        from schemas import schema_path

        return schema_path(self.name)


BUILTIN_DATASETS: dict[str, dict[str, Any]] = {
    # scikit-learn's 1,797 8x8 digits: written to TFRecord on first use.
    "digits": dict(
        name="digits",
        image_shape=(8, 8, 1),
        pixel_feature="pixels",
        label_feature="label",
        num_classes=10,
    ),
    # 1,000 real MNIST digits from the TFX repository, pixels scaled to [-0.5, 0.5].
    "mnist": dict(
        name="mnist",
        data_dir=str(SHARED_DATA_DIR),
        file_pattern="mnist.tfrecord",
        image_shape=(28, 28, 1),
        pixel_feature="image_floats",
        label_feature="image_class",
        num_classes=10,
    ),
}

ModelName = Literal["mnist_cnn", "cifar10_cnn"]
Accelerator = Literal["auto", "tpu", "gpu", "cpu"]
Precision = Literal["float32", "mixed_bfloat16", "mixed_float16"]


class TrainerConfig(_Section):
    """How the Trainer trains: model, batch, steps and device choices.

    `jit_compile` and `precision` left unset follow the device: XLA and bfloat16
    on TPU, XLA and float16 on GPU, neither on CPU (XLA:CPU measured slower for
    these CNNs; see docs/benchmarks.md).
    """

    model: ModelName = "mnist_cnn"
    per_replica_batch_size: int = Field(default=64, ge=1)
    train_steps: int = Field(default=600, ge=1)
    epochs: int = Field(default=6, ge=1, description="train_steps are split over epochs")
    eval_steps: int | None = Field(
        default=None, ge=1, description="None evaluates every whole batch of the eval split"
    )
    learning_rate: float = Field(default=2e-3, gt=0)
    shuffle_buffer: int = Field(default=4096, ge=1)
    seed: int = 42
    accelerator: Accelerator = "auto"
    tpu_name: str | None = Field(
        default=None, description="TPU name or grpc:// address; default: TPU_NAME or local"
    )
    tpu_connect_timeout_s: float = Field(default=60.0, gt=0)
    jit_compile: bool | None = None
    precision: Precision | None = None
    profile_batches: tuple[int, int] | None = Field(
        default=None, description="first and last batch to trace with the profiler"
    )

    @model_validator(mode="after")
    def _steps_cover_epochs(self) -> TrainerConfig:
        if self.train_steps < self.epochs:
            raise ValueError(
                f"train_steps ({self.train_steps}) must be at least epochs ({self.epochs})"
            )
        if self.profile_batches and not 0 < self.profile_batches[0] <= self.profile_batches[1]:
            raise ValueError(
                f"profile_batches must be (first, last) with 0 < first <= last, "
                f"got {self.profile_batches}"
            )
        return self


class EvaluatorConfig(_Section):
    """What a model must reach to be blessed and pushed."""

    accuracy_lower_bound: float = Field(default=0.9, ge=0, le=1)
    max_accuracy_drop: float = Field(
        default=0.0, ge=0, le=1, description="allowed drop against the last blessed model"
    )


class PipelineConfig(_Section):
    """A whole run: names, output folder, dataset, Trainer and Evaluator."""

    pipeline_name: str = Field(default="tpu-pipeline", pattern=r"^[a-z0-9][a-z0-9-]*$")
    output_dir: str = "output"
    dataset: DatasetConfig = Field(default_factory=lambda: DatasetConfig(**BUILTIN_DATASETS["digits"]))
    trainer: TrainerConfig = TrainerConfig()
    evaluator: EvaluatorConfig = EvaluatorConfig()
    enable_cache: bool = True
    beam_pipeline_args: list[str] = Field(
        default_factory=list,
        description="Extra Beam flags; any makes TFX package the code per Beam component",
    )

    @model_validator(mode="before")
    @classmethod
    def _expand_builtin_dataset(cls, values: Any) -> Any:
        """Let `dataset: mnist` (or a mapping naming a built-in) stand for its full entry."""
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
        if isinstance(dataset, dict) and dataset.get("name") in BUILTIN_DATASETS:
            dataset = {**BUILTIN_DATASETS[dataset["name"]], **dataset}
        return {**values, "dataset": dataset}

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


def _set_dotted(tree: dict[str, Any], dotted_key: str, value: Any) -> None:
    *parents, leaf = dotted_key.split(".")
    for key in parents:
        node = tree.get(key)
        if isinstance(node, str):  # `dataset: mnist` becomes a mapping once a field is set
            node = {"name": node}
        tree[key] = node = dict(node or {})
        tree = node
    tree[leaf] = value


def _format_errors(error: ValidationError, source: str) -> str:
    lines = [f"invalid configuration ({source}):"]
    for item in error.errors():
        field = ".".join(str(part) for part in item["loc"]) or "<root>"
        message = item["msg"].removeprefix("Value error, ")
        got = f" (got {item['input']!r})" if not isinstance(item["input"], dict) else ""
        lines.append(f"  {field}: {message}{got}")
    return "\n".join(lines)


def load_config(path: str | None = None, overrides: dict[str, Any] | None = None) -> PipelineConfig:
    """Builds the configuration from an optional YAML file and dotted-key overrides.

    Args:
      path: YAML file with any subset of the fields; missing fields keep defaults.
      overrides: values from flags, keyed by dotted field name
        (e.g. `{"trainer.train_steps": 100, "dataset": "mnist"}`); they win over
        the file.

    Raises:
      ConfigError: the file cannot be read, or a field holds a value not allowed;
        the message names every offending field.
    """
    raw: dict[str, Any] = {}
    source = "defaults"
    if path:
        source = str(path)
        try:
            loaded = yaml.safe_load(pathlib.Path(path).read_text())
        except (OSError, yaml.YAMLError) as error:
            raise ConfigError(f"cannot read configuration file {path}: {error}") from error
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"configuration file {path} must hold a mapping of fields")
        raw = loaded or {}
    flags = {key: value for key, value in (overrides or {}).items() if value is not None}
    for key, value in flags.items():
        _set_dotted(raw, key, value)
    if flags:
        source = f"{source} + flags"
    try:
        return PipelineConfig.model_validate(raw)
    except ValidationError as error:
        raise ConfigError(_format_errors(error, source)) from None
