"""The user's own model: `trainer.model: package.module:function`.

`function(image_shape, num_classes)` returns an uncompiled tf_keras Model from
float32 images of `image_shape` to class logits. It is called with the Keras
precision policy of the run set globally, so its layers compute in bfloat16 on
a TPU like the built-ins do; the pipeline adds the float32 softmax, compiles,
trains and exports it exactly as it does a built-in. Every way the reference
can be wrong is reported in one line naming it and what to change.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import pathlib
import re
from collections.abc import Callable

import tf_keras

from tpu_pipeline.common.config import ConfigError
from tpu_pipeline.components.models._precision import global_policy

# package.module:function, as in Python entry points.
REFERENCE = re.compile(r"^(?P<module>[A-Za-z_]\w*(\.[A-Za-z_]\w*)*):(?P<function>[A-Za-z_]\w*)$")

UserModelFn = Callable[[tuple[int, int, int], int], tf_keras.Model]


def is_user_model(name: str) -> bool:
    """A `module:function` reference rather than a built-in model's name."""
    return ":" in name


def _fail(reference: str, problem: str) -> ConfigError:
    return ConfigError(f"trainer.model {reference!r}: {problem}")


def load_user_model_fn(reference: str) -> UserModelFn:
    """Imports `package.module:function` and checks it takes (image_shape, num_classes).

    Raises:
      ConfigError: the module cannot be imported, has no such function, or the
        function cannot be called with two arguments.
    """
    match = REFERENCE.match(reference)
    if not match:
        raise _fail(reference, "expected package.module:function")
    module_name, function_name = match["module"], match["function"]
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # user code can fail to import in any way
        raise _fail(
            reference,
            f"cannot import {module_name}: {type(error).__name__}: {error} "
            "(install it, or put its folder on PYTHONPATH)",
        ) from error
    function = getattr(module, function_name, None)
    if not callable(function):
        raise _fail(reference, f"{module_name} ({module.__file__}) has no function {function_name}")
    try:
        inspect.signature(function).bind((1, 1, 1), 2)
    except TypeError as error:
        raise _fail(
            reference, f"must be callable as {function_name}(image_shape, num_classes): {error}"
        ) from error
    except ValueError:  # no signature to inspect (a builtin): calling it will tell
        pass
    return function


def user_model_source(reference: str) -> pathlib.Path:
    """The file or package folder holding the user's model code, to fingerprint for caching.

    The whole top-level package counts: the function may use any module of it.
    """
    top_level = REFERENCE.match(reference)["module"].split(".")[0] if ":" in reference else ""
    spec = importlib.util.find_spec(top_level) if top_level else None
    if spec is None or spec.origin is None:
        raise _fail(reference, f"cannot find module {top_level!r}")
    origin = pathlib.Path(spec.origin)
    return origin.parent if spec.submodule_search_locations else origin


def _applies_softmax(model: tf_keras.Model) -> bool:
    last = model.layers[-1] if model.layers else None
    return isinstance(last, tf_keras.layers.Softmax) or (
        getattr(last, "activation", None) is tf_keras.activations.softmax
    )


def user_logits(
    reference: str,
    inputs: tf_keras.layers.Layer,
    num_classes: int,
    policy: tf_keras.mixed_precision.Policy,
) -> tf_keras.layers.Layer:
    """Class logits of `inputs` from the user's model, built under `policy`.

    Raises:
      ConfigError: naming what is wrong: not a tf_keras Model, another input
        shape, another output shape, or probabilities instead of logits.
    """
    function = load_user_model_fn(reference)
    image_shape = tuple(inputs.shape[1:])
    with global_policy(policy):
        model = function(image_shape, num_classes)
    if not isinstance(model, tf_keras.Model):
        raise _fail(
            reference,
            f"returned {type(model).__module__}.{type(model).__name__}; expected an uncompiled "
            "tf_keras.Model (build it with `import tf_keras`, not Keras 3)",
        )
    if _applies_softmax(model):
        raise _fail(
            reference,
            "its last layer applies softmax; return logits: the pipeline adds a float32 softmax",
        )
    try:
        logits = model(inputs)
    except (ValueError, TypeError) as error:
        raise _fail(
            reference,
            f"cannot take images of shape {image_shape}: {str(error).splitlines()[0]}",
        ) from error
    if logits.shape.as_list() != [None, num_classes]:
        raise _fail(
            reference,
            f"returns shape {tuple(logits.shape)} for images {image_shape}; "
            f"expected (None, {num_classes}): one logit per class",
        )
    return logits
