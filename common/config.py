"""The one typed, validated configuration of a tpu-pipeline run.

Everything a run can change lives here: the dataset, the Trainer's device and
model choices, the Evaluator's thresholds and where outputs go. A YAML file and
command-line flags both feed `load_config`, and every error names the field that
is wrong and what is allowed, so a typo fails in a second instead of an hour
into a TPU job.
"""

from __future__ import annotations

import math
import pathlib
import zoneinfo
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
# Data the built-in datasets ship with (package data; see common/data/*/README.md).
BUILTIN_DATA_DIR = pathlib.Path(__file__).resolve().parent / "data"


class ConfigError(ValueError):
    """A configuration file or flag holds a value that is not allowed."""


class _Section(BaseModel):
    # Unknown keys are typos: reject them instead of silently ignoring them.
    model_config = ConfigDict(extra="forbid", frozen=True)


class SourceConfig(_Section):
    """How to read raw files that are not yet in the pipeline's layout.

    One example per format is in docs/data-formats.md.
    """

    pixel_feature: str | None = Field(
        default=None, description="TFRecord feature of the pixels; default: dataset.pixel_feature"
    )
    pixel_encoding: Literal["float", "image"] = Field(
        default="float",
        description="float pixel list, or PNG/JPEG bytes (checked and kept encoded by ExampleGen)",
    )
    label_feature: str | None = Field(
        default=None, description="TFRecord feature or CSV column; default: dataset.label_feature"
    )
    label_names: tuple[str, ...] | None = Field(
        default=None, description="class names in label order, for string labels and image folders"
    )
    id_feature: str | None = Field(
        default=None, description="TFRecord feature copied unchanged into the examples"
    )
    resize: bool = Field(
        default=False, description="resize images to image_shape; off, other sizes are errors"
    )
    max_image_side: int | None = Field(
        default=None,
        ge=1,
        description="image sources: shrink images whose longer side exceeds this many pixels "
        "once, in ExampleGen (aspect kept; re-encoded as JPEG quality 95 or PNG); "
        "null keeps every image's bytes unchanged",
    )
    image_value_range: tuple[float, float] = Field(
        default=(0.0, 255.0),
        description="pixel values that 0 and 255 of an 8-bit encoded image become "
        "(in ExampleGen and the `images` serving signature)",
    )

    @model_validator(mode="after")
    def _increasing_value_range(self) -> SourceConfig:
        low, high = self.image_value_range
        if not low < high:
            raise ValueError(
                f"image_value_range must be (low, high) with low < high, got {low, high}"
            )
        return self


class SplitPatterns(_Section):
    """The files of the training split and of the eval split, for layouts whose folder names do
    not say which is which (folders named train, test, eval, val or validation already do).

    Whole files go to a split, for every format: a file's own test part (an .npz's
    `x_test`) follows its pattern's split too.
    """

    train: str = Field(min_length=1, description="training files, relative to data_dir")
    eval: str = Field(min_length=1, description="eval files, relative to data_dir")

    @model_validator(mode="after")
    def _two_fixed_patterns(self) -> SplitPatterns:
        if self.train == self.eval:
            raise ValueError(
                f"train and eval are the same pattern {self.train!r}; a file belongs to one split"
            )
        if "{SPAN}" in self.train + self.eval:
            raise ValueError(
                "{SPAN} is not supported here; for spans use file_pattern with train and eval "
                "folders inside each span, e.g. 'span-{SPAN}/*/*.tfrecord*'"
            )
        return self


class DatasetConfig(_Section):
    """Where the raw examples are and how to read them.

    By default the data is a folder of TFRecord files of `tf.train.Example`,
    each holding a flat float list of pixels (row-major, channels last) and an
    int64 label. ExampleGen converts every other `format` into that layout,
    except image sources, whose encoded bytes it keeps (`stores_encoded_images`).
    """

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    data_dir: str | None = Field(
        default=None, description="Folder of TFRecord files; built-in datasets fill it in."
    )
    file_pattern: str | None = Field(
        default=None, description="files under data_dir to read; default: the format's own"
    )
    split_patterns: SplitPatterns | None = Field(
        default=None,
        description="the files of each split, instead of file_pattern; unset: folder names "
        "or the format's own splits, else a hash split by eval_percent",
    )
    image_shape: tuple[int, int, int] = Field(description="height, width, channels")
    pixel_feature: str
    label_feature: str
    num_classes: int = Field(ge=2)
    schema_file: str | None = Field(
        default=None, description="Curated schema; defaults to schemas/<name>/schema.pbtxt."
    )
    eval_percent: int = Field(default=20, ge=1, le=50)
    span_window: int = Field(
        default=1, ge=1, description="with {SPAN} in file_pattern: latest spans each run reads"
    )
    label_drift_threshold: float | None = Field(
        default=0.1,
        gt=0,
        le=1,
        description="with {SPAN} in file_pattern: largest L-infinity distance allowed between "
        "this span's label distribution and the previous span's; null: no check",
    )
    format: str = Field(
        default="tfrecord",
        pattern=r"^[a-z0-9_]+$",
        description="a reader of components/example_gen/formats.py",
    )
    source: SourceConfig = SourceConfig()

    @model_validator(mode="after")
    def _positive_shape(self) -> DatasetConfig:
        if any(dim < 1 for dim in self.image_shape):
            raise ValueError(f"image_shape must be positive, got {self.image_shape}")
        names = self.source.label_names
        if names is not None and len(names) != self.num_classes:
            raise ValueError(
                f"source.label_names has {len(names)} names but num_classes is {self.num_classes}"
            )
        if self.split_patterns is not None and self.file_pattern is not None:
            raise ValueError(
                "split_patterns names the files of both splits: leave out file_pattern "
                f"(it is {self.file_pattern!r})"
            )
        return self

    @model_validator(mode="after")
    def _shrink_only_images(self) -> DatasetConfig:
        side = self.source.max_image_side
        if side is not None and not self.stores_encoded_images:
            raise ValueError(
                "source.max_image_side shrinks encoded images: it needs format image_folder, "
                "or format tfrecord with source.pixel_encoding: image"
            )
        if side is not None and side < max(self.image_shape[:2]):
            raise ValueError(
                f"source.max_image_side ({side}) is below the image_shape's longer side "
                f"({max(self.image_shape[:2])}): training would upscale what ingest shrank"
            )
        return self

    @property
    def pixel_count(self) -> int:
        height, width, channels = self.image_shape
        return height * width * channels

    @property
    def stores_encoded_images(self) -> bool:
        """Whether ExampleGen keeps each image's encoded (PNG/JPEG) bytes in `pixel_feature`.

        True for image sources (image folders, TFRecords with `source.pixel_encoding:
        image`): their examples hold one bytes value per image. False for float sources
        (npz, IDX, CSV, CIFAR-10 binary, float TFRecords), whose examples hold
        `pixel_count` floats.
        """
        return self.format == "image_folder" or (
            self.format == "tfrecord" and self.source.pixel_encoding == "image"
        )

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
        # Pixels are 0-16: a PNG's 0-255 map onto that range when served as images.
        source=dict(image_value_range=(0.0, 16.0)),
    ),
    # 1,000 real MNIST digits from the TFX repository, pixels scaled to [-0.5, 0.5].
    "mnist": dict(
        name="mnist",
        data_dir=str(BUILTIN_DATA_DIR / "mnist"),
        file_pattern="mnist.tfrecord.gz",
        image_shape=(28, 28, 1),
        pixel_feature="image_floats",
        label_feature="image_class",
        num_classes=10,
        source=dict(image_value_range=(-0.5, 0.5)),
    ),
}

DEFAULT_DATASET = "digits"

Accelerator = Literal["auto", "tpu", "gpu", "cpu"]
Optimizer = Literal["adam", "adamw", "sgd"]
LearningRateScaling = Literal["linear", "sqrt", "none"]
LearningRateDecay = Literal["cosine", "step", "constant"]
Precision = Literal["float32", "mixed_bfloat16", "mixed_float16"]


class TrainerConfig(_Section):
    """How the Trainer trains: model, batch, steps and device choices.

    `jit_compile` and `precision` left unset follow the device: XLA and bfloat16
    on TPU, XLA and float16 on GPU, neither on CPU (XLA:CPU measured slower for
    these CNNs; see docs/benchmarks.md).
    """

    model: str = Field(
        default="cnn_bn",
        pattern=r"^([a-z0-9_]+|[A-Za-z_][\w.]*:[A-Za-z_]\w*)$",
        description="a built-in model (a module of components/models/) or package.module:function",
    )
    per_replica_batch_size: int = Field(default=64, ge=1)
    train_steps: int | None = Field(
        default=None,
        ge=1,
        description="None: `epochs` passes over the training data; a number is split over epochs",
    )
    epochs: int = Field(default=15, ge=1)
    eval_steps: int | None = Field(
        default=None, ge=1, description="None evaluates every whole batch of the eval split"
    )
    optimizer: Optimizer = "adam"
    learning_rate: float = Field(
        default=2e-3, gt=0, description="peak rate at a global batch of learning_rate_batch_size"
    )
    learning_rate_batch_size: int = Field(
        default=64, ge=1, description="global batch the learning_rate is tuned for"
    )
    learning_rate_scaling: LearningRateScaling = Field(
        default="sqrt",
        description="peak rate x (global batch / learning_rate_batch_size), or its square root",
    )
    warmup_epochs: float = Field(
        default=1.0, ge=0, description="linear warmup from zero to the peak rate"
    )
    learning_rate_decay: LearningRateDecay = Field(
        default="cosine",
        description="after warmup: cosine to zero, step (x0.1 at 50% and 75%), or constant",
    )
    momentum: float = Field(default=0.9, ge=0, lt=1, description="sgd only")
    weight_decay: float = Field(default=0.004, ge=0, description="adamw only (decoupled)")
    dropout: float | None = Field(
        default=None, ge=0, lt=1, description="dropout rate of models with dropout; None: theirs"
    )
    random_shift: float = Field(
        default=0.1,
        ge=0,
        lt=0.5,
        description="training images move by up to this fraction of their height and width "
        "(whole pixels, rounded down; zero fill); 0 turns it off",
    )
    random_flip: bool = Field(
        default=False,
        description="mirror training images left-right at random (photos, not digits)",
    )
    shuffle_buffer: int = Field(default=4096, ge=1)
    seed: int = 42
    accelerator: Accelerator = "auto"
    tpu_name: str | None = Field(
        default=None, description="TPU name or grpc:// address; default: TPU_NAME or local"
    )
    tpu_connect_timeout_s: float = Field(default=60.0, gt=0)
    worker_join_timeout_s: float = Field(
        default=300.0,
        gt=0,
        description="multi-worker (TF_CONFIG): how long each task waits for all to join",
    )
    tpu_preflight: bool = Field(
        default=True, description="on a TPU, check the step compiles (on CPU) before training"
    )
    jit_compile: bool | None = None
    precision: Precision | None = None
    accelerator_memory_gib: float = Field(
        default=16.0,
        gt=0,
        description="memory of one replica's accelerator that preflight checks the step "
        "against; default one TPU v5e chip (16 GiB HBM)",
    )
    steps_per_execution: int | None = Field(
        default=None, ge=1, description="training steps per tf.function call; null: the device's"
    )
    loop: Literal["fit", "custom"] = Field(
        default="fit", description="Keras fit, or the custom GradientTape loop"
    )
    profile_batches: tuple[int, int] | None = Field(
        default=None, description="first and last batch to trace with the profiler"
    )
    warm_start: bool = Field(
        default=False, description="start from the last blessed model's weights, when there is one"
    )

    @model_validator(mode="after")
    def _steps_cover_epochs(self) -> TrainerConfig:
        if self.train_steps is not None and self.train_steps < self.epochs:
            raise ValueError(
                f"train_steps ({self.train_steps}) must be at least epochs ({self.epochs})"
            )
        if self.profile_batches and not 0 < self.profile_batches[0] <= self.profile_batches[1]:
            raise ValueError(
                f"profile_batches must be (first, last) with 0 < first <= last, "
                f"got {self.profile_batches}"
            )
        return self


# What the Trainer's fit logs for the eval split; accuracy is maximised, loss minimised.
TunerObjective = Literal["val_accuracy", "val_loss"]
# TrainerConfig fields a search may not vary: they choose the device or the bookkeeping,
# fix what every trial is measured on, or set the length (trials: `tuner.trial_steps`).
UNTUNABLE_TRAINER_FIELDS = frozenset(
    {
        "train_steps",
        "accelerator",
        "tpu_name",
        "tpu_connect_timeout_s",
        "worker_join_timeout_s",
        "tpu_preflight",
        "profile_batches",
        "warm_start",
        "accelerator_memory_gib",
        "eval_steps",
        "seed",
    }
)
SearchValue = int | float | str | bool


class SearchDimension(_Section):
    """The values one TrainerConfig field takes in a search: a list, or a numeric range.

    A range of two integers searches integers (a batch size); `step` makes a range
    discrete; `sampling: log` spreads trials evenly over orders of magnitude.
    """

    values: tuple[SearchValue, ...] | None = Field(default=None, min_length=1)
    min: int | float | None = None
    max: int | float | None = None
    step: int | float | None = Field(default=None, gt=0)
    sampling: Literal["linear", "log"] = "linear"

    @model_validator(mode="after")
    def _values_or_range(self) -> SearchDimension:
        has_range = self.min is not None or self.max is not None
        if (self.values is not None) == has_range:
            raise ValueError("give either values: [...] or min and max")
        if has_range:
            if self.min is None or self.max is None or self.min >= self.max:
                raise ValueError(f"min must be below max, got min={self.min} max={self.max}")
            if self.sampling == "log" and self.min <= 0:
                raise ValueError("sampling: log needs min > 0")
        return self

    @property
    def extremes(self) -> tuple[SearchValue, ...]:
        """Values the field must accept: every listed value, or both ends of the range."""
        return self.values if self.values is not None else (self.min, self.max)


def _default_search_space() -> dict[str, SearchDimension]:
    return {
        "learning_rate": SearchDimension(min=1e-4, max=1e-2, sampling="log"),
        "per_replica_batch_size": SearchDimension(values=(32, 64, 128)),
        "dropout": SearchDimension(min=0.1, max=0.5),
    }


class TunerConfig(_Section):
    """A hyperparameter search (TFX's Tuner, KerasTuner) before the Trainer; off by default.

    Each trial trains through the Trainer's own code for `trial_steps` steps and is
    scored on the eval split; the Trainer then trains with the best trial's values.
    `search_space` keys are TrainerConfig field names, so any field of the training
    recipe can be searched. Hyperband's trial count follows from `trainer.epochs`
    (its largest budget), not `max_trials`.
    """

    enabled: bool = False
    algorithm: Literal["random", "hyperband", "bayesian"] = "random"
    objective: TunerObjective = "val_accuracy"
    max_trials: int = Field(default=8, ge=1, description="random and bayesian searches")
    trial_steps: int = Field(default=100, ge=1, description="training steps per trial")
    num_parallel_trials: int = Field(
        default=1, ge=1, description="Vertex AI: trials run at once, one custom-job worker each"
    )
    search_space: dict[str, SearchDimension] = Field(
        default_factory=_default_search_space, min_length=1
    )

    @field_validator("search_space")
    @classmethod
    def _tunable_fields(cls, space: dict[str, SearchDimension]) -> dict[str, SearchDimension]:
        """Every key is a tunable TrainerConfig field, and every value one it accepts."""
        tunable = sorted(set(TrainerConfig.model_fields) - UNTUNABLE_TRAINER_FIELDS)
        for name, dimension in space.items():
            if name not in tunable:
                raise ValueError(f"{name!r} is not a tunable trainer field; tunable: {tunable}")
            for value in dimension.extremes:
                try:
                    TrainerConfig.model_validate({name: value})
                except ValidationError as error:
                    reason = error.errors()[0]["msg"]
                    raise ValueError(
                        f"{name}: {value!r} is not a valid trainer.{name}: {reason}"
                    ) from None
        return space


class EvaluatorConfig(_Section):
    """What a model must reach to be blessed and pushed."""

    accuracy_lower_bound: float = Field(default=0.9, ge=0, le=1)
    max_accuracy_drop: float = Field(
        default=0.0, ge=0, le=1, description="allowed drop against the last blessed model"
    )


GcsUri = Annotated[str, Field(pattern=r"^gs://[a-z0-9][a-z0-9._-]+(/.*)?$")]
TPU_V5E_MACHINE_PREFIX = "ct5lp-hightpu-"  # TPU v5e VMs: the chips come with the machine type


class VertexTrainerConfig(_Section):
    """Where the Trainer runs on Vertex AI: in its pipeline step or as a custom training job.

    The machine fields are Vertex's MachineSpec: TPU v2-8 / v3-8 is machine type
    `cloud-tpu` with accelerator TPU_V2 / TPU_V3 x 8; TPU v5e is a machine type
    `ct5lp-hightpu-{1,4,8}t` (chips implied, optional `tpu_topology`); a GPU is
    an accelerator such as NVIDIA_TESLA_A100 with a count, on a matching machine.

    More than one machine: `replica_count` GPU or CPU machines train data-parallel
    (a chief and `replica_count - 1` workers, MultiWorkerMirroredStrategy); a TPU
    slice larger than one host is one replica with a larger `tpu_topology` (v5e:
    `ct5lp-hightpu-4t` hosts of 4 chips, e.g. 4x4 = 16 chips on 4 hosts).
    """

    runs_on: Literal["pipeline_step", "custom_job"] = "pipeline_step"
    machine_type: str = "n1-standard-8"
    accelerator_type: str | None = Field(default=None, pattern=r"^(TPU_V[23]|NVIDIA_[A-Z0-9_]+)$")
    accelerator_count: int = Field(default=0, ge=0)
    tpu_topology: str | None = Field(default=None, pattern=r"^\d+x\d+(x\d+)?$")
    replica_count: int = Field(
        default=1, ge=1, description="machines training data-parallel: a chief and N-1 workers"
    )
    image: str | None = Field(default=None, description="custom job image; default: pipeline_image")

    @model_validator(mode="after")
    def _consistent_machine(self) -> VertexTrainerConfig:
        accelerator, count = self.accelerator_type or "", self.accelerator_count
        if (self.machine_type == "cloud-tpu") != accelerator.startswith("TPU_"):
            raise ValueError("machine_type 'cloud-tpu' goes with accelerator_type TPU_V2 or TPU_V3")
        if accelerator.startswith("TPU_") and count != 8:
            raise ValueError(f"{accelerator} on Vertex AI comes as 8 cores: accelerator_count: 8")
        if accelerator.startswith("NVIDIA_") and count < 1:
            raise ValueError(f"{accelerator} needs accelerator_count >= 1")
        if not accelerator and count:
            raise ValueError("accelerator_count is set but accelerator_type is not")
        if self.machine_type.startswith(TPU_V5E_MACHINE_PREFIX) and accelerator:
            raise ValueError(f"{self.machine_type} has its TPU chips: leave accelerator_type unset")
        if self.tpu_topology and self.device != "tpu":
            raise ValueError("tpu_topology applies to TPU machine types only")
        if self.device == "tpu" and self.replica_count > 1:
            raise ValueError(
                "replica_count: a TPU slice is one replica; for more hosts set a larger "
                "tpu_topology (e.g. machine_type ct5lp-hightpu-4t, tpu_topology 4x4)"
            )
        if self.replica_count > 1 and self.runs_on != "custom_job":
            raise ValueError("replica_count > 1 needs runs_on: custom_job")
        if self.tpu_topology and self.chips_per_host:
            chips = self.topology_chips
            if chips % self.chips_per_host:
                raise ValueError(
                    f"tpu_topology {self.tpu_topology} ({chips} chips) is not a whole number "
                    f"of {self.machine_type} hosts ({self.chips_per_host} chips each)"
                )
        return self

    @property
    def chips_per_host(self) -> int:
        """TPU v5e chips per machine, the 4 of ct5lp-hightpu-4t; 0 for other machines."""
        if not self.machine_type.startswith(TPU_V5E_MACHINE_PREFIX):
            return 0
        return int(self.machine_type.removeprefix(TPU_V5E_MACHINE_PREFIX).removesuffix("t"))

    @property
    def topology_chips(self) -> int:
        """Chips in `tpu_topology`: the product of its dimensions (4x4 -> 16)."""
        return math.prod(int(side) for side in (self.tpu_topology or "1").split("x"))

    @property
    def hosts(self) -> int:
        """Machines the Trainer runs on: the replicas, or the hosts of a multi-host TPU slice."""
        if self.tpu_topology and self.chips_per_host:
            return self.topology_chips // self.chips_per_host
        return self.replica_count

    @property
    def device(self) -> Literal["tpu", "gpu", "cpu"]:
        """What the custom job trains on, from its machine spec."""
        if self.machine_type.startswith(TPU_V5E_MACHINE_PREFIX) or self.machine_type == "cloud-tpu":
            return "tpu"
        return "gpu" if self.accelerator_type else "cpu"


class DataflowConfig(_Section):
    """Runs the Beam components (statistics, Transform, Evaluator) on Dataflow."""

    temp_location: GcsUri
    max_num_workers: int = Field(default=4, ge=1)
    machine_type: str | None = None


class ModelRegistryConfig(_Section):
    """Uploads each pushed model as a new version of one Vertex AI Model Registry entry."""

    model_display_name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_ .-]{0,127}$")
    serving_image: str = "us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15:latest"
    endpoint_display_name: str | None = Field(
        default=None, description="deploy each new version to this endpoint (created if missing)"
    )
    endpoint_machine_type: str = "n1-standard-2"


class ScheduleConfig(_Section):
    """When Vertex AI reruns the pipeline (`tpu-pipeline schedule create`)."""

    display_name: str | None = Field(default=None, description="default: the pipeline name")
    cron: str = Field(default="0 3 * * 1", pattern=r"^\S+( \S+){4}$")
    time_zone: str = "UTC"
    max_concurrent_run_count: int = Field(default=1, ge=1)
    start_time: AwareDatetime | None = Field(default=None, description="e.g. 2027-01-01T00:00:00Z")
    end_time: AwareDatetime | None = None

    @model_validator(mode="after")
    def _known_time_zone(self) -> ScheduleConfig:
        if self.time_zone not in zoneinfo.available_timezones():
            raise ValueError(f"time_zone {self.time_zone!r} is not an IANA time zone name")
        return self


class VertexConfig(_Section):
    """Where and how the pipeline runs on Vertex AI Pipelines (see kubeflow/vertex-*.yaml)."""

    project: str = Field(pattern=r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
    region: str = "us-central1"
    pipeline_root: GcsUri
    data_root: GcsUri
    serving_dir: GcsUri
    pipeline_image: str = Field(description="image with TFX and this package (kubeflow/Dockerfile)")
    service_account: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    trainer: VertexTrainerConfig = VertexTrainerConfig()
    dataflow: DataflowConfig | None = None
    model_registry: ModelRegistryConfig | None = None
    schedule: ScheduleConfig = ScheduleConfig()


TFLiteVariant = Literal["float32", "float16", "dynamic_int8", "int8"]


class ServingConfig(_Section):
    """What is published beside each blessed SavedModel, and the accuracy it must keep.

    Each TFLite variant is measured on the whole eval split against the
    SavedModel and published with it only when its accuracy is at most
    `max_accuracy_drop` lower (docs/serving/tflite.md).
    """

    tflite_variants: tuple[TFLiteVariant, ...] = Field(
        default=("float32", "float16", "dynamic_int8", "int8"),
        description="float32, float16 (weights), dynamic_int8 (weights), int8 (full integer)",
    )
    max_accuracy_drop: float = Field(
        default=0.01, ge=0, le=1, description="largest eval accuracy drop against the SavedModel"
    )
    representative_examples: int = Field(
        default=200, ge=1, description="training examples that calibrate the int8 variant"
    )
    latency_examples: int = Field(
        default=200, ge=1, description="eval images each model classifies one at a time, timed"
    )

    @model_validator(mode="after")
    def _distinct_variants(self) -> ServingConfig:
        if len(set(self.tflite_variants)) != len(self.tflite_variants):
            raise ValueError(f"tflite_variants lists a variant twice: {self.tflite_variants}")
        return self


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
    enable_cache: bool = True
    beam_pipeline_args: list[str] = Field(
        default_factory=list,
        description="Extra Beam flags; any makes TFX package the code per Beam component",
    )
    vertex: VertexConfig | None = Field(
        default=None, description="Vertex AI Pipelines settings, read by compile/submit/schedule"
    )

    @model_validator(mode="before")
    @classmethod
    def _expand_builtin_dataset(cls, values: Any) -> Any:
        """Let `dataset: mnist` (or a mapping naming a built-in) stand for its full entry.

        A mapping without a name overrides fields of the default dataset (digits).
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
