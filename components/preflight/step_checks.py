"""Preflight checks of the training step itself: it traces, lowers to XLA, and runs.

The step is the configured loop's own (Keras's `train_step` or the custom
loop's), traced with the TPU's precision policy and static per-replica shapes,
so what fails to compile on a TPU fails here first.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import tensorflow as tf
import tf_keras

from tpu_pipeline.components.preflight.report import CheckResult, failed
from tpu_pipeline.components.training.autograph import skip_autograph_for_graph_safe_code
from tpu_pipeline.components.training.custom_loop import CustomLoop


def check_float32_outputs(model: tf_keras.Model) -> CheckResult:
    """Model outputs stay float32 under the mixed policy, so losses and served scores do."""
    wrong = [
        f"{name} outputs {output.dtype.name}"
        for output, name in zip(model.outputs, model.output_names, strict=True)
        if output.dtype != tf.float32
    ]
    if wrong:
        return CheckResult(
            "float32_outputs", "fail", f"{'; '.join(wrong)}; give the last layer dtype='float32'"
        )
    return CheckResult("float32_outputs", "pass", f"{', '.join(model.output_names)}: float32")


def replica_train_step(
    model: tf_keras.Model, loop: str, batch: int
) -> Callable[[tf.Tensor, tf.Tensor], object]:
    """The step the configured loop runs on each replica: Keras's `train_step` or the custom one."""
    if loop == "custom":
        return CustomLoop(model, tf.distribute.get_strategy(), batch, jit_compile=True).train_step
    return lambda images, labels: model.train_step((images, labels))


def trace_train_step(
    model: tf_keras.Model,
    image_spec: tf.TensorSpec,
    label_spec: tf.TensorSpec,
    loop: str = "fit",
) -> tuple[tf.types.experimental.GenericFunction, tf.Graph]:
    """Traces the loop's training step (forward, loss, gradients, update) under XLA."""
    skip_autograph_for_graph_safe_code()
    # Variables are created outside the traced step, as a TPU step requires.
    model.optimizer.build(model.trainable_variables)
    replica_step = replica_train_step(model, loop, image_spec.shape[0])

    @tf.function(jit_compile=True)
    def step(images: tf.Tensor, labels: tf.Tensor) -> object:
        return replica_step(images, labels)

    return step, step.get_concrete_function(image_spec, label_spec).graph


def check_xla_compile(
    step: tf.types.experimental.GenericFunction, specs: list[tf.TensorSpec]
) -> CheckResult:
    """XLA lowers the whole training step to HLO, as the TPU compiler's first stage does."""
    started = time.perf_counter()
    args = [tf.zeros(spec.shape, spec.dtype) for spec in specs]
    try:
        hlo = step.experimental_get_compiler_ir(*args)(stage="hlo")
    except Exception as error:  # XLA reports unsupported ops and shapes as many error types
        return failed("xla_compile", error)
    seconds = time.perf_counter() - started
    return CheckResult(
        "xla_compile", "pass", f"{len(hlo.splitlines())} HLO lines in {seconds:.1f} s"
    )


def check_step_runs(
    step: tf.types.experimental.GenericFunction, specs: list[tf.TensorSpec], num_classes: int
) -> CheckResult:
    """One real training step runs, XLA-compiled, on this CPU and gives a finite loss.

    Lowering proves the ops exist; running proves the compiled program executes
    (kernels, buffer sizes, bfloat16 arithmetic), so runtime-only failures
    surface here rather than on the TPU.
    """
    images_spec, labels_spec = specs
    images = tf.random.stateless_uniform(images_spec.shape, seed=(0, 0), dtype=images_spec.dtype)
    labels = tf.cast(tf.range(labels_spec.shape[0]) % num_classes, labels_spec.dtype)
    started = time.perf_counter()
    try:
        loss = float(step(images, labels)["loss"])
    except Exception as error:  # XLA reports runtime failures as many error types
        return failed("train_step_runs", error)
    seconds = time.perf_counter() - started
    if not math.isfinite(loss):
        return CheckResult(
            "train_step_runs", "fail", f"loss is {loss} after one step; check the model's numerics"
        )
    return CheckResult(
        "train_step_runs",
        "pass",
        f"one XLA step on CPU (compile + run) in {seconds:.1f} s, loss {loss:.3g}",
    )


def check_steps_per_execution(
    step: tf.types.experimental.GenericFunction,
    specs: list[tf.TensorSpec],
    steps_per_execution: int,
    steps_per_epoch: int | None,
) -> CheckResult:
    """The loop of `steps_per_execution` steps lowers to one XLA program, as a TPU runs it.

    `steps_per_epoch` is None when the epoch is one pass over data preflight does not read.
    """
    if steps_per_epoch is not None and steps_per_execution > steps_per_epoch:
        return CheckResult(
            "steps_per_execution",
            "warn",
            f"{steps_per_execution} steps per call but only {steps_per_epoch} per epoch: "
            "each call stops at the epoch's end; lower trainer.steps_per_execution",
        )

    @tf.function(jit_compile=True)
    def steps(images: tf.Tensor, labels: tf.Tensor) -> None:
        for _ in tf.range(steps_per_execution):
            step(images, labels)

    args = [tf.zeros(spec.shape, spec.dtype) for spec in specs]
    try:
        steps.experimental_get_compiler_ir(*args)(stage="hlo")
    except Exception as error:  # XLA reports unsupported ops and shapes as many error types
        return failed("steps_per_execution", error)
    detail = f"{steps_per_execution} steps per call compile to one program"
    if steps_per_epoch is not None:
        detail += f"; {-(-steps_per_epoch // steps_per_execution)} calls per epoch"
    return CheckResult("steps_per_execution", "pass", detail)
