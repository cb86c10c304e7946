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
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable

import tf_keras

from common.config import ConfigError
from components.contract import IMAGE_KEY
from components.models._user_model import (
    is_user_model,
    load_user_model_fn,
    user_logits,
    user_model_source,
)

__all__ = [
    "MODEL_BUILDERS",
    "build_model",
    "check_model",
    "compile_model",
    "is_user_model",
    "user_model_source",
]

LogitsFn = Callable[
    [tf_keras.layers.Layer, int, tf_keras.mixed_precision.Policy], tf_keras.layers.Layer
]

MODEL_BUILDERS: dict[str, LogitsFn] = {
    module.name: importlib.import_module(f"{__name__}.{module.name}").logits
    for module in pkgutil.iter_modules(__path__)
    if not module.name.startswith("_")
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
        'mixed_bfloat16'. Variables stay float32 under every policy.
      dropout: the dropout rate of a model whose `logits` takes a `dropout`
        keyword (None keeps the model's own); it changes no weights, so a
        serving copy built without it is the same model.

    Raises:
      ConfigError: `dropout` is set for a model that has none.
    """
    policy = tf_keras.mixed_precision.Policy(precision)
    inputs = tf_keras.Input(shape=image_shape, name=IMAGE_KEY)
    options = {}
    if dropout is not None:
        logits_fn = None if is_user_model(name) else get_model_builder(name)
        if logits_fn is None or "dropout" not in inspect.signature(logits_fn).parameters:
            raise ConfigError(f"trainer.dropout: model {name!r} has no dropout; leave it unset")
        options["dropout"] = dropout
    if is_user_model(name):
        logits = user_logits(name, inputs, num_classes, policy)
    else:
        logits = get_model_builder(name)(inputs, num_classes, policy, **options)
    probabilities = tf_keras.layers.Activation("softmax", dtype="float32", name="probabilities")(
        logits
    )
    return tf_keras.Model(inputs, probabilities, name=name.rpartition(":")[2])


def compile_model(
    model: tf_keras.Model,
    optimizer: tf_keras.optimizers.Optimizer,
    jit_compile: bool,
    precision: str,
    steps_per_execution: int = 1,
) -> None:
    """Compiles with sparse cross-entropy; float16 gets dynamic loss scaling.

    Args:
      model: from `build_model`.
      optimizer: the recipe's optimizer (`components.training.learning_rate.make_optimizer`).
      jit_compile: compile the step with XLA.
      precision: the Keras precision policy the model was built with.
      steps_per_execution: training steps per `tf.function` call, so an
        accelerator is not left idle waiting for the host between steps.
    """
    if precision == "mixed_float16":
        optimizer = tf_keras.mixed_precision.LossScaleOptimizer(optimizer)
    model.compile(
        optimizer=optimizer,
        loss=tf_keras.losses.SparseCategoricalCrossentropy(),
        # Weighted: the zero-weight examples that fill the last eval batch must not count.
        weighted_metrics=[tf_keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        jit_compile=jit_compile,
        steps_per_execution=steps_per_execution,
    )
