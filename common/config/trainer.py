"""The `trainer:` section: the model, the training recipe and the device choices."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from tpu_pipeline.common.config.base import _Section
from tpu_pipeline.common.config.pruning import PruningConfig

Accelerator = Literal["auto", "tpu", "gpu", "cpu"]
Optimizer = Literal["adam", "adamw", "sgd"]
LearningRateScaling = Literal["linear", "sqrt", "none"]
LearningRateDecay = Literal["cosine", "linear", "step", "constant"]
WeightAveraging = Literal["none", "ema", "lookahead"]
Precision = Literal["float32", "mixed_bfloat16", "mixed_float16"]
TrainingProcess = Literal["auto", "child", "same"]

# The airbench94 recipe in TrainerConfig's terms: its rate of 11.5 per 1024 examples of a
# summed loss under momentum 0.85 is 1.5 for a mean loss at a batch of 1024; its weight
# decay (coupled, amplified 1/(1 - momentum) by the momentum) is 0.0089 x the rate
# decoupled. 10 epochs of 50,000 images is its 94 % point; the warmup is 23 % of them
# (a recipe that changes the epochs keeps that share).
FAST_CNN_RECIPE = {
    "per_replica_batch_size": 1024,
    "epochs": 10,
    "warmup_epochs": 2.3,
    "optimizer": "sgd",
    "momentum": 0.85,
    "learning_rate": 1.5,
    "learning_rate_batch_size": 1024,
    "learning_rate_scaling": "linear",
    "learning_rate_decay": "linear",
    "weight_decay": 0.0089,
    "label_smoothing": 0.2,
    "weight_averaging": "lookahead",
    "random_flip": True,
    "random_shift": 2 / 32,
    "random_crop_area": (1.0, 1.0),  # photos only: whole images, shifted
    "test_time_flip": True,
}
# The TrainerConfig values a built-in model trains best with: `tpu-pipeline run` fills the
# fields a user left unset from them (pipeline/wiring/recipe.py).
MODEL_RECIPES: dict[str, dict] = {"fast_cnn": FAST_CNN_RECIPE}


class PromisedDevices(_Section):
    """What a Vertex AI job's machine spec promises the Trainer (set by compile, not by hand).

    The Trainer compares it with what it connected to and stops before the first
    step when they differ (`components/device/replica_guard.py`), so a slice that
    came up as one host never trains on a quarter of its chips.
    """

    replicas: int = Field(ge=1, description="chips (TPU), GPUs x machines, or machines (CPU)")
    hosts: int = Field(default=1, ge=1, description="TPU slice hosts, or TF_CONFIG workers")
    machine: str = Field(description="the promise in words: ct5lp-hightpu-4t x tpu_topology 4x4")


class TrainerConfig(_Section):
    """How the Trainer trains: model, batch, steps and device choices.

    `jit_compile` and `precision` left unset follow the device: XLA and bfloat16
    on TPU, XLA and float16 on GPU, no XLA on CPU (XLA:CPU measured slower for
    these CNNs; see docs/benchmarks.md) and bfloat16 only on a CPU that computes it
    natively (AVX512-BF16 or AMX), float32 elsewhere.
    """

    model: str = Field(
        default="cnn_bn",
        pattern=r"^([a-z0-9_]+|[A-Za-z_][\w.]*:[A-Za-z_]\w*)$",
        description="a built-in model (a module of components/models/) or "
        "package.module:function; unset: cnn_bn, or for photos (encoded images) resnet20, "
        "which `tpu-pipeline run` replaces with a pretrained mobilenet_v2 when its ImageNet "
        "file is within reach (pipeline/wiring/recipe.py)",
    )
    pretrained_weights: str = Field(
        default="none",
        min_length=1,
        description="backbones only (efficientnet_b0, resnet50, mobilenet_v2): none (random), "
        "imagenet (Keras's file, downloaded or from ~/.keras/models/), or the path (local or "
        "gs://) of a backbone weights .h5; the head always starts new",
    )
    frozen_backbone_epochs: int = Field(
        default=0,
        ge=0,
        description="backbones only: the first epochs train the head alone (backbone frozen, "
        "BatchNorm in inference mode); the rest fine-tune the whole model at "
        "fine_tune_learning_rate_factor x the peak rate. 0: one phase, nothing frozen",
    )
    fine_tune_learning_rate_factor: float = Field(
        default=0.1,
        gt=0,
        le=1,
        description="with frozen_backbone_epochs: the fine-tuning epochs' peak rate, as a "
        "fraction of the recipe's",
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
        description="after warmup: cosine to zero, linear to zero (with warmup, a one-cycle "
        "schedule), step (x0.1 at 50% and 75%), or constant",
    )
    momentum: float = Field(default=0.9, ge=0, lt=1, description="sgd only")
    weight_decay: float | None = Field(
        default=None,
        ge=0,
        description="adamw and sgd: each step shrinks every trained weight by this x the "
        "step's learning rate (decoupled from the gradient); null: 0.004 for adamw, 0 for sgd",
    )
    label_smoothing: float = Field(
        default=0.0,
        ge=0,
        lt=1,
        description="the training loss's targets put this share of the probability evenly on "
        "every class (Szegedy et al., 2016); 0: one-hot targets",
    )
    weight_averaging: WeightAveraging = Field(
        default="none",
        description="ema: the exported weights are a moving average of the trained ones, "
        "averaging over more steps as the run ends (up to ~20); lookahead: the same average, "
        "and training restarts from it every 5 steps (Zhang et al., 2019); none: the last "
        "step's weights",
    )
    test_time_flip: bool = Field(
        default=False,
        description="the exported model answers the mean of its answers for each image and "
        "its mirror image (every signature: the evaluated model is the served one); doubles "
        "the serving compute",
    )
    time_budget_minutes: float | None = Field(
        default=None,
        gt=0,
        description="photos trained from scratch: the whole run's wall time the recipe plans "
        "the model and epochs within, from a short probe of this device's speed; null: "
        "45 minutes (pipeline/wiring/recipe.py)",
    )
    dropout: float | None = Field(
        default=None, ge=0, lt=1, description="dropout rate of models with dropout; None: theirs"
    )
    random_shift: float | None = Field(
        default=None,
        ge=0,
        lt=0.5,
        description="training images move by up to this fraction of their height and width "
        "(whole pixels, rounded down; the border filled with zeros, a photo's with its mirror "
        "image); 0 turns it off; null: 0.1 for pixel data, "
        "0 for photos (which get random crops instead)",
    )
    random_flip: bool | None = Field(
        default=None,
        description="mirror training images left-right: at random where photos are randomly "
        "cropped, else by turns (each image in every other pass); null: on for photos "
        "(encoded images), off for pixel data such as digits",
    )
    random_crop_area: tuple[float, float] | None = Field(
        default=None,
        description="photos only: each training image is a random window covering this "
        "fraction range of the photo's area (aspect 3/4 to 4/3), resized to image_shape; "
        "null: (0.25, 1.0) for photos; [1, 1] turns it off",
    )
    class_weight: Literal["none", "balanced"] = Field(
        default="none",
        description="balanced: each class's examples weigh total / (classes x class count) "
        "in the training loss, so rare classes count as much as common ones",
    )
    shuffle_buffer: int = Field(default=4096, ge=1)
    seed: int = 42
    accelerator: Accelerator = "auto"
    tpu_name: str | None = Field(
        default=None, description="TPU name or grpc:// address; default: TPU_NAME or local"
    )
    tpu_connect_timeout_s: float = Field(default=60.0, gt=0)
    training_process: TrainingProcess = Field(
        default="auto",
        description="child: train in a process of its own, which gives the training's memory "
        "back when it ends (on CPU, TensorFlow keeps its pool for the life of a process); "
        "same: in the pipeline's process; auto: child for large batches of pixels on a "
        "CPU-only machine of one worker, else same (components/training/separate_process.py)",
    )
    worker_join_timeout_s: float = Field(
        default=300.0,
        gt=0,
        description="multi-worker (TF_CONFIG): how long each task waits for all to join",
    )
    worker_heartbeat_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="multi-worker: how long a task may go silent before training stops as "
        "lost (TensorFlow's coordination-service heartbeat; raise it on loaded machines)",
    )
    promised_devices: PromisedDevices | None = Field(
        default=None,
        description="set when compiling a Vertex AI custom job: the replicas and hosts its "
        "machine spec promises; None (local runs) checks nothing",
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
    pruning: PruningConfig | None = Field(
        default=None,
        description="zero the smallest weights while training (target_sparsity, schedule); "
        "null: no pruning",
    )

    @field_validator("pretrained_weights", mode="before")
    @classmethod
    def _null_is_none(cls, value: object) -> object:
        return "none" if value is None else value

    @model_validator(mode="after")
    def _steps_cover_epochs(self) -> TrainerConfig:
        if self.random_crop_area is not None:
            low, high = self.random_crop_area
            if not 0 < low <= high <= 1:
                raise ValueError(
                    f"random_crop_area must be (min, max) with 0 < min <= max <= 1, "
                    f"got {self.random_crop_area}"
                )
        if self.train_steps is not None and self.train_steps < self.epochs:
            raise ValueError(
                f"train_steps ({self.train_steps}) must be at least epochs ({self.epochs})"
            )
        if self.profile_batches and not 0 < self.profile_batches[0] <= self.profile_batches[1]:
            raise ValueError(
                f"profile_batches must be (first, last) with 0 < first <= last, "
                f"got {self.profile_batches}"
            )
        if self.frozen_backbone_epochs > self.epochs:
            raise ValueError(
                f"frozen_backbone_epochs ({self.frozen_backbone_epochs}) must be at most "
                f"epochs ({self.epochs})"
            )
        if self.frozen_backbone_epochs and self.pretrained_weights == "none":
            raise ValueError(
                "frozen_backbone_epochs needs pretrained_weights (imagenet or a file): a frozen "
                "random backbone teaches the head nothing"
            )
        if self.pruning and self.frozen_backbone_epochs:
            raise ValueError(
                "pruning cannot follow frozen_backbone_epochs: each phase recompiles the model, "
                "and the frozen phase would prune weights it does not train; set one of them"
            )
        return self
