"""The registry of built-in models: every public module of this package is one model.

Adding a model is adding a module here (its name is the `trainer.model` value) with a
`logits(inputs, num_classes, dtype)` function (plus a `dropout` keyword if it has dropout,
so `trainer.dropout` can set and tune it); nothing else changes. A user's own
model, `trainer.model: package.module:function`, is built through the same
`build_model` (see `_user_model.py`). Layers use 'same'
padding so the CNNs also fit small images (8x8 digits), and fixed names so TensorBoard
tags and preflight messages name the same layer in every run. The final softmax always
computes in float32, whatever the precision policy, so losses and served probabilities
keep full precision.

A model whose first layers are computed from the data, not learned (a whitening
layer), has an `initialize(model, images)` the Trainer calls with training images
before the first step (`initialize_from_data`).

A backbone module (one Keras application behind a new head, `_backbone.py`) also
has a `BACKBONE`; only backbones take `trainer.pretrained_weights` and the
fine-tuning phases (`trainer.frozen_backbone_epochs`).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable

import numpy as np
import tensorflow as tf
import tf_keras

from tpu_pipeline.common.config import ConfigError, DatasetConfig, TrainerConfig
from tpu_pipeline.components.contract import IMAGE_KEY
from tpu_pipeline.components.models import _pretrained
from tpu_pipeline.components.models._backbone import Backbone, freeze_backbone
from tpu_pipeline.components.models._exported import restore_exported_weights
from tpu_pipeline.components.models._flops import forward_flops, training_flops
from tpu_pipeline.components.models._user_model import (
    is_user_model,
    load_user_model_fn,
    user_logits,
    user_model_source,
)

__all__ = [
    "BACKBONES",
    "PROBABILITIES_LAYER",
    "MODEL_BUILDERS",
    "build_model",
    "check_backbone_settings",
    "check_model",
    "compile_model",
    "forward_flops",
    "freeze_backbone",
    "initialize_from_data",
    "is_backbone",
    "is_user_model",
    "load_pretrained_weights",
    "needs_data_to_initialize",
    "require_downloadable_weights",
    "restore_exported_weights",
    "serving_copy",
    "serving_model",
    "training_flops",
    "user_model_source",
    "weights_fingerprint",
]

# Every model's last layer: the float32 softmax over its logits (the layer's input).
PROBABILITIES_LAYER = "probabilities"

LogitsFn = Callable[
    [tf_keras.layers.Layer, int, tf_keras.mixed_precision.Policy], tf_keras.layers.Layer
]

_MODULES = {
    module.name: importlib.import_module(f"{__name__}.{module.name}")
    for module in pkgutil.iter_modules(__path__)
    if not module.name.startswith("_")
}
MODEL_BUILDERS: dict[str, LogitsFn] = {name: module.logits for name, module in _MODULES.items()}
DATA_INITIALIZERS: dict[str, Callable[[tf_keras.Model, np.ndarray], None]] = {
    name: module.initialize for name, module in _MODULES.items() if hasattr(module, "initialize")
}
BACKBONES: dict[str, Backbone] = {
    name: module.BACKBONE for name, module in _MODULES.items() if hasattr(module, "BACKBONE")
}


def get_model_builder(name: str) -> LogitsFn:
    """The `logits` function of built-in model `name`; a ConfigError names the choices."""
    if name not in MODEL_BUILDERS:
        raise ConfigError(
            f"trainer.model: unknown model {name!r}; allowed: {', '.join(sorted(MODEL_BUILDERS))}"
            " or package.module:function"
        )
    return MODEL_BUILDERS[name]


def check_model(name: str) -> None:
    """Fails fast, before any component runs, on a model that cannot be found or called.

    Raises:
      ConfigError: an unknown built-in, or a user model that cannot be imported
        or does not take (image_shape, num_classes).
    """
    if is_user_model(name):
        load_user_model_fn(name)
    else:
        get_model_builder(name)


def is_backbone(name: str) -> bool:
    """A built-in Keras application behind a new head (pretrained weights, fine-tuning)."""
    return name in BACKBONES


def check_backbone_settings(trainer: TrainerConfig, image_shape: tuple[int, int, int]) -> None:
    """Fails fast, before any component runs, on backbone settings that cannot work.

    No network: a gs:// PATH is read, and `imagenet` fetched, where the model trains
    (`require_downloadable_weights` checks the latter for a run on this machine).

    Raises:
      ConfigError: pretrained weights or frozen epochs for a model that is not a
        backbone, images a backbone cannot take, or a local PATH that is no .h5 file.
    """
    backbone = BACKBONES.get(trainer.model)
    if backbone is None:
        if trainer.pretrained_weights != _pretrained.NONE:
            raise ConfigError(
                f"trainer.pretrained_weights: model {trainer.model!r} is not a backbone "
                f"({', '.join(sorted(BACKBONES))}); leave it none"
            )
        return
    backbone.check_image_shape(image_shape)
    _pretrained.check_weights_source(trainer.pretrained_weights)


def require_downloadable_weights(trainer: TrainerConfig, image_shape: tuple[int, int, int]) -> None:
    """For a run that trains on this machine: `imagenet` is cached or can be downloaded.

    Raises:
      ConfigError: one line naming the file to fetch and how to set PATH instead.
    """
    if trainer.pretrained_weights == _pretrained.IMAGENET and is_backbone(trainer.model):
        _pretrained.require_imagenet_weights(BACKBONES[trainer.model], image_shape)


weights_fingerprint = _pretrained.weights_fingerprint


def load_pretrained_weights(
    model: tf_keras.Model, trainer: TrainerConfig, image_shape: tuple[int, int, int]
) -> _pretrained.LoadedWeights | None:
    """Loads `trainer.pretrained_weights` into the backbone of `model` (built by `build_model`).

    Returns:
      The weights file read and its sha256, or None (`none`, or not a backbone).

    Raises:
      ConfigError: the file is missing, unreadable or another backbone's, or
        `imagenet` can neither be found in Keras's cache nor downloaded, or its cached
        file fails tf_keras's hash.
    """
    if not is_backbone(trainer.model):
        return None
    return _pretrained.load_pretrained_weights(
        model, BACKBONES[trainer.model], trainer.pretrained_weights, image_shape
    )


def build_model(
    name: str,
    image_shape: tuple[int, int, int],
    num_classes: int,
    precision: str = "float32",
    dropout: float | None = None,
) -> tf_keras.Model:
    """Builds the named model: images in, class probabilities (float32) out.

    Args:
      name: a built-in model (a module of this package) or the user's
        `package.module:function`.
      image_shape: height, width, channels of one image.
      num_classes: size of the output layer.
      precision: Keras precision policy for the hidden layers, e.g.
        'mixed_bfloat16'. Trained variables stay float32 under every policy.
      dropout: the dropout rate of a model whose `logits` takes a `dropout`
        keyword (None keeps the model's own); it changes no weights, so a
        serving copy built without it is the same model.

    Raises:
      ConfigError: `dropout` is set for a model that has none.
    """
    policy = tf_keras.mixed_precision.Policy(precision)
    inputs = tf_keras.Input(shape=image_shape, name=IMAGE_KEY)
    logits_fn = None if is_user_model(name) else get_model_builder(name)
    options = {}
    if dropout is not None:
        if logits_fn is None or "dropout" not in inspect.signature(logits_fn).parameters:
            raise ConfigError(f"trainer.dropout: model {name!r} has no dropout; leave it unset")
        options["dropout"] = dropout
    if logits_fn is not None:
        logits = logits_fn(inputs, num_classes, policy, **options)
    else:
        logits = user_logits(name, inputs, num_classes, policy)
    probabilities = tf_keras.layers.Activation(
        "softmax", dtype="float32", name=PROBABILITIES_LAYER
    )(logits)
    return tf_keras.Model(inputs, probabilities, name=name.rpartition(":")[2])


def needs_data_to_initialize(name: str) -> bool:
    """Whether built-in model `name` computes some weights from training images."""
    return name in DATA_INITIALIZERS


def initialize_from_data(name: str, model: tf_keras.Model, images: np.ndarray) -> None:
    """Sets the weights of `model` (built by `build_model(name, ...)`) that training
    `images` [n, height, width, channels] decide; nothing for other models."""
    if name in DATA_INITIALIZERS:
        DATA_INITIALIZERS[name](model, images)


@tf_keras.utils.register_keras_serializable(package="tpu_pipeline")
class SmoothedSparseCrossentropy(tf_keras.losses.Loss):
    """Cross-entropy of class probabilities against integer labels, the one-hot targets
    smoothed: `label_smoothing` of the probability spread evenly over every class."""

    def __init__(self, label_smoothing: float, **kwargs):
        super().__init__(**kwargs)
        self.label_smoothing = label_smoothing

    def call(self, y_true, y_pred):
        labels = tf.cast(tf.reshape(y_true, [-1]), tf.int32)
        targets = tf.one_hot(labels, tf.shape(y_pred)[-1], dtype=y_pred.dtype)
        return tf_keras.losses.categorical_crossentropy(
            targets, y_pred, label_smoothing=self.label_smoothing
        )

    def get_config(self) -> dict:
        return {**super().get_config(), "label_smoothing": self.label_smoothing}


def compile_model(
    model: tf_keras.Model,
    optimizer: tf_keras.optimizers.Optimizer,
    jit_compile: bool,
    precision: str,
    steps_per_execution: int = 1,
    label_smoothing: float = 0.0,
) -> None:
    """Compiles with sparse cross-entropy; float16 gets dynamic loss scaling.

    Args:
      model: from `build_model`.
      optimizer: the recipe's optimizer (`training.learning_rate.make_optimizer`).
      jit_compile: compile the step with XLA.
      precision: the Keras precision policy the model was built with.
      steps_per_execution: training steps per `tf.function` call, so an
        accelerator is not left idle waiting for the host between steps.
      label_smoothing: the targets' share spread over every class (0: one-hot).
    """
    if precision == "mixed_float16":
        optimizer = tf_keras.mixed_precision.LossScaleOptimizer(optimizer)
    model.compile(
        optimizer=optimizer,
        loss=(
            SmoothedSparseCrossentropy(label_smoothing)
            if label_smoothing
            else tf_keras.losses.SparseCategoricalCrossentropy()
        ),
        # Weighted: the zero-weight examples that fill the last eval batch must not count.
        weighted_metrics=[tf_keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        jit_compile=jit_compile,
        steps_per_execution=steps_per_execution,
    )


def serving_copy(
    weights: list[np.ndarray], model_name: str, dataset: DatasetConfig
) -> tf_keras.Model:
    """A float32 model with the trained `weights` (float32 under every policy).

    It takes the weights, not the trained model: under MultiWorkerMirroredStrategy
    reading a BatchNorm moving statistic is an all-reduce, so every worker must read
    them (`model.get_weights()`) together, while only the chief builds the copy.
    """
    copy = build_model(model_name, dataset.image_shape, dataset.num_classes, precision="float32")
    copy.set_weights(weights)
    return copy


def serving_model(
    model: tf_keras.Model,
    model_name: str,
    dataset: DatasetConfig,
    precision: str,
    num_workers: int,
) -> tf_keras.Model:
    """What the Trainer exports of its trained `model`: the model itself where it computed in
    float32 on one worker, else a float32 copy of its weights (`serving_copy`).

    Every worker of a cluster calls it: reading the weights is a collective there.
    """
    if precision == "float32" and num_workers == 1:
        return model
    return serving_copy(model.get_weights(), model_name, dataset)
