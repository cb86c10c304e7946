"""TPU preflight: prove on a CPU, in seconds, that the training step will run on a TPU.

A TPU job that fails to compile fails after the VM, the data and the container
are up, and is billed by the hour. Every check here works from the traced
training step (forward, loss, gradients, optimizer update: Keras's own
`train_step`) with the TPU's precision policy and the static per-replica input
shapes, and XLA lowers that same step, so what fails on the TPU fails here,
named by check, layer and op.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from typing import Literal

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras
from tensorflow.python.framework import kernels

from common.config import ConfigError, DatasetConfig, TrainerConfig
from components.accelerator_memory import GIB, describe, estimate_memory
from components.autograph import skip_autograph_for_tf_keras
from components.custom_loop import CustomLoop
from components.device_policy import TrainingPolicy, resolve_training_policy
from components.input_pipeline import global_batch_size
from components.learning_rate import make_optimizer
from components.models import build_model, compile_model
from components.preprocessing import IMAGE_KEY, LABEL_KEY

Status = Literal["pass", "warn", "fail", "skip"]
# Cores of one TPU v2-8 / v3-8 board: the smallest common TPU slice.
DEFAULT_TPU_REPLICAS = 8
# TPUs tile the batch dimension by 8; smaller multiples pad every step.
TPU_BATCH_TILE = 8
# Kernels that mean "XLA can lower this op"; the TPU's own table is not loadable off a TPU.
_XLA_DEVICES = frozenset({"XLA_CPU_JIT", "XLA_GPU_JIT"})
# Graph plumbing that never reaches the compiled computation.
_GRAPH_ONLY_OPS = frozenset({"Placeholder"})
# Checks that need the traced step, and those that also need the model.
STEP_CHECKS = (
    "accelerator_memory",
    "static_shapes",
    "no_float64",
    "no_host_ops",
    "xla_compile",
    "train_step_runs",
    "steps_per_execution",
)
MODEL_CHECKS = ("model_builds", "float32_outputs", "train_step_traces", *STEP_CHECKS)
# Above this share of the accelerator's memory the estimate warns (it errs high, but not by much).
MEMORY_WARN_FRACTION = 0.8
# At most this many offenders are named per check.
_MAX_NAMED = 5

ModelBuilder = Callable[[str], tf_keras.Model]


class PreflightError(RuntimeError):
    """The configured model or input would not run on a TPU; the message holds the report."""


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """One named check: its status and what it found (the offending layer or op)."""

    name: str
    status: Status
    detail: str


@dataclasses.dataclass(frozen=True)
class PreflightReport:
    """Every check of one preflight, in the order they ran."""

    title: str
    checks: list[CheckResult]

    @property
    def passed(self) -> bool:
        return all(check.status != "fail" for check in self.checks)

    def check(self, name: str) -> CheckResult:
        """The result of the check called `name`."""
        return next(check for check in self.checks if check.name == name)

    def to_text(self) -> str:
        width = max(len(check.name) for check in self.checks)
        lines = [self.title]
        lines += [f"  {c.status.upper():<4}  {c.name:<{width}}  {c.detail}" for c in self.checks]
        lines.append("preflight passed" if self.passed else "preflight FAILED")
        return "\n".join(lines)


def input_specs(
    dataset: DatasetConfig, transform_output: tft.TFTransformOutput | None = None
) -> dict[str, tf.io.FixedLenFeature | tf.io.VarLenFeature | tf.io.SparseFeature]:
    """The transformed features the model receives: the Transform graph's, else the config's."""
    if transform_output is not None:
        return dict(transform_output.transformed_feature_spec())
    return {
        IMAGE_KEY: tf.io.FixedLenFeature(dataset.image_shape, tf.float32),
        LABEL_KEY: tf.io.FixedLenFeature([], tf.int64),
    }


def check_policy(
    trainer: TrainerConfig, replicas: int
) -> tuple[CheckResult, TrainingPolicy | None]:
    """The TPU policy resolves (XLA, bfloat16 unless overridden) without a forbidden override."""
    try:
        policy = resolve_training_policy("tpu", replicas, trainer)
    except ValueError as error:
        return CheckResult("tpu_policy", "fail", str(error)), None
    # TPUStrategy compiles with XLA whatever jit_compile says; preflight compiles too.
    return CheckResult("tpu_policy", "pass", f"XLA, precision {policy.precision}"), policy


def check_batch_split(global_batch: int, replicas: int) -> CheckResult:
    """The global batch splits into equal per-replica batches, ideally whole TPU tiles."""
    if replicas < 1 or global_batch % replicas:
        return CheckResult(
            "batch_split",
            "fail",
            f"global batch {global_batch} does not divide across {replicas} replicas; "
            "set trainer.per_replica_batch_size instead of a global size",
        )
    per_replica = global_batch // replicas
    detail = f"global batch {global_batch} = {replicas} replicas x {per_replica}"
    if per_replica % TPU_BATCH_TILE:
        return CheckResult(
            "batch_split",
            "warn",
            f"{detail}; {per_replica} is not a multiple of {TPU_BATCH_TILE}, so every step pads",
        )
    return CheckResult("batch_split", "pass", detail)


def check_static_input(specs: dict, batch: int) -> tuple[CheckResult, dict[str, tf.TensorSpec]]:
    """Every feature the model gets is dense, of a known shape, and a TPU dtype."""
    problems, tensor_specs = [], {}
    for name, spec in sorted(specs.items()):
        if not isinstance(spec, tf.io.FixedLenFeature):
            problems.append(
                f"{name}: {type(spec).__name__} has no static shape; make it fixed-length"
            )
        elif spec.dtype == tf.string:
            problems.append(f"{name}: string features cannot go to a TPU; decode them in Transform")
        else:
            shape = tf.TensorShape([batch, *spec.shape])
            if not shape.is_fully_defined():
                problems.append(f"{name}: shape {shape} is not fully known")
            tensor_specs[name] = tf.TensorSpec(shape, spec.dtype, name=name)
    if problems:
        return CheckResult("static_input", "fail", "; ".join(problems)), {}
    detail = ", ".join(f"{n} {s.dtype.name} {s.shape.as_list()}" for n, s in tensor_specs.items())
    return CheckResult("static_input", "pass", detail), tensor_specs


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


def check_memory(model: tf_keras.Model, batch: int, memory_gib: float) -> CheckResult:
    """The step's estimated per-replica memory fits the accelerator, else the largest users."""
    estimate = estimate_memory(model, batch)
    budget = memory_gib * GIB
    parts = (
        f"parameters {describe(estimate.parameters)}, gradients {describe(estimate.gradients)}, "
        f"optimizer slots {describe(estimate.optimizer_slots)}, "
        f"activations {describe(estimate.activations)}"
    )
    largest = ", ".join(f"{name} {describe(size)}" for name, size in estimate.largest())
    detail = (
        f"estimated {describe(estimate.total)} of {memory_gib:g} GiB per replica ({parts}); "
        f"largest: {largest}"
    )
    if estimate.total > budget:
        return CheckResult(
            "accelerator_memory",
            "fail",
            f"{detail}. Lower trainer.per_replica_batch_size or the model size, or set "
            "trainer.accelerator_memory_gib to the memory of the accelerator you use",
        )
    status = "warn" if estimate.total > MEMORY_WARN_FRACTION * budget else "pass"
    return CheckResult("accelerator_memory", status, detail)


def _where(op: tf.Operation, layer_names: set[str]) -> str:
    """'layer X, op Y (Type)' for an op inside a Keras layer's name scope, else the op alone."""
    # The innermost layer: a user's model sits inside ours as one layer.
    layer = next((part for part in reversed(op.name.split("/")) if part in layer_names), None)
    where = f"op {op.name} ({op.type})"
    return f"layer {layer}, {where}" if layer else where


def _named(findings: list[str]) -> str:
    shown = "; ".join(findings[:_MAX_NAMED])
    more = len(findings) - _MAX_NAMED
    return f"{shown}; and {more} more" if more > 0 else shown


def _graph_check(name: str, findings: list[str], ok: str, advice: str) -> CheckResult:
    if findings:
        return CheckResult(name, "fail", f"{_named(findings)}. {advice}")
    return CheckResult(name, "pass", ok)


def _is_workspace(tensor: tf.Tensor) -> bool:
    """A fused batch norm `reserve_space_*` output (or zeros like one, in its gradient).

    These are kernel workspaces: traced on a CPU their size is unknown, and XLA
    sizes them itself when it lowers the op. They hold no data a program must know.
    """
    op = tensor.op
    if op.type == "ZerosLike":
        return _is_workspace(op.inputs[0])
    names = [arg.name for arg in op.op_def.output_arg] if op.op_def else []
    return tensor.value_index < len(names) and names[tensor.value_index].startswith("reserve_space")


def _data_outputs(op: tf.Operation) -> list[tf.Tensor]:
    """The op's outputs whose shapes a TPU program must know: no handles, no workspaces."""
    return [t for t in op.outputs if t.dtype != tf.resource and not _is_workspace(t)]


def check_graph(graph: tf.Graph, model: tf_keras.Model) -> list[CheckResult]:
    """Static shapes, no float64, and no host-only or string ops in the traced step."""
    layer_names = {
        module.name for module in model.submodules if isinstance(module, tf_keras.layers.Layer)
    }
    ops = graph.get_operations()
    dynamic, wide, host = [], [], []
    for op in ops:
        tensors = [*op.inputs, *op.outputs]
        if any(not t.shape.is_fully_defined() for t in _data_outputs(op)):
            shapes = ", ".join(str(t.shape) for t in op.outputs)
            dynamic.append(f"{_where(op, layer_names)} -> {shapes}")
        if any(t.dtype == tf.float64 for t in tensors):
            wide.append(_where(op, layer_names))
        if any(t.dtype == tf.string for t in tensors):
            host.append(f"{_where(op, layer_names)} uses strings")
        elif op.type not in _GRAPH_ONLY_OPS and not _has_xla_kernel(op.type):
            host.append(f"{_where(op, layer_names)} has no XLA kernel")
    wide += [f"variable {v.name}" for v in model.variables if v.dtype == tf.float64]
    return [
        _graph_check(
            "static_shapes",
            dynamic,
            f"all {len(ops)} ops of the step have static shapes",
            "TPUs compile one program per shape: avoid ops whose output size depends on the data "
            "(boolean_mask, unique, where with one argument)",
        ),
        _graph_check(
            "no_float64",
            wide,
            "no float64 tensors or variables",
            "TPUs have no float64: use float32",
        ),
        _graph_check(
            "no_host_ops",
            host,
            "every op has an XLA kernel; no strings",
            "Move Python, printing and string work out of the model (into Transform or callbacks)",
        ),
    ]


def _has_xla_kernel(op_type: str) -> bool:
    registered = kernels.get_registered_kernels_for_op(op_type).kernel
    return any(kernel.device_type in _XLA_DEVICES for kernel in registered)


def check_xla_compile(
    step: tf.types.experimental.GenericFunction, specs: list[tf.TensorSpec]
) -> CheckResult:
    """XLA lowers the whole training step to HLO, as the TPU compiler's first stage does."""
    started = time.perf_counter()
    args = [tf.zeros(spec.shape, spec.dtype) for spec in specs]
    try:
        hlo = step.experimental_get_compiler_ir(*args)(stage="hlo")
    except Exception as error:  # XLA reports unsupported ops and shapes as many error types
        first_line = (
            str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        )
        return CheckResult("xla_compile", "fail", f"{type(error).__name__}: {first_line}")
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
        return CheckResult("train_step_runs", "fail", _first_line(error))
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


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")


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
    skip_autograph_for_tf_keras()
    # Variables are created outside the traced step, as a TPU step requires.
    model.optimizer.build(model.trainable_variables)
    replica_step = replica_train_step(model, loop, image_spec.shape[0])

    @tf.function(jit_compile=True)
    def step(images: tf.Tensor, labels: tf.Tensor) -> object:
        return replica_step(images, labels)

    return step, step.get_concrete_function(image_spec, label_spec).graph


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
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return CheckResult("steps_per_execution", "fail", f"{type(error).__name__}: {first_line}")
    detail = f"{steps_per_execution} steps per call compile to one program"
    if steps_per_epoch is not None:
        detail += f"; {-(-steps_per_epoch // steps_per_execution)} calls per epoch"
    return CheckResult("steps_per_execution", "pass", detail)


def _epoch_steps(trainer: TrainerConfig) -> int | None:
    return None if trainer.train_steps is None else max(1, trainer.train_steps // trainer.epochs)


def run_preflight(
    dataset: DatasetConfig,
    trainer: TrainerConfig,
    *,
    replicas: int = DEFAULT_TPU_REPLICAS,
    transform_output: tft.TFTransformOutput | None = None,
    model_builder: ModelBuilder | None = None,
) -> PreflightReport:
    """Runs every check on this machine's CPU and reports each by name.

    Args:
      dataset: image shape and classes of the configured data.
      trainer: the model, per-replica batch and precision choices.
      replicas: TPU cores the global batch is split over (8 on a v2-8/v3-8).
      transform_output: the Transform graph, whose transformed feature spec is
        what the model really receives; None uses the dataset's image shape.
      model_builder: builds the model for a precision policy name; default is
        the configured built-in model. Tests plant problems through it.
    """
    builder = model_builder or (
        lambda precision: build_model(
            trainer.model, dataset.image_shape, dataset.num_classes, precision
        )
    )
    batch = trainer.per_replica_batch_size
    title = (
        f"TPU preflight: {trainer.model} on {dataset.name}, image {list(dataset.image_shape)}, "
        f"{replicas} replicas x batch {batch}, loop {trainer.loop}"
    )
    policy_result, policy = check_policy(trainer, replicas)
    batch_result = check_batch_split(global_batch_size(batch, replicas), replicas)
    input_result, tensor_specs = check_static_input(input_specs(dataset, transform_output), batch)
    checks = [policy_result, batch_result, input_result]
    if policy is None or input_result.status == "fail":
        return PreflightReport(
            title, checks + _skipped(MODEL_CHECKS, "needs tpu_policy and static_input")
        )

    with tf.device("/CPU:0"):
        try:
            model = builder(policy.precision)
        except ConfigError as error:  # the user's model: cannot import, wrong output...
            checks.append(CheckResult("model_builds", "fail", str(error)))
            return PreflightReport(title, checks + _skipped(MODEL_CHECKS[1:], "no model"))
        checks.append(CheckResult("model_builds", "pass", f"{model.count_params():,} parameters"))
        optimizer = make_optimizer(trainer, global_batch_size(batch, replicas), 1, trainer.epochs)
        compile_model(model, optimizer, jit_compile=True, precision=policy.precision)
        checks.append(check_float32_outputs(model))
        specs = [tensor_specs[IMAGE_KEY], tensor_specs[LABEL_KEY]]
        try:
            step, graph = trace_train_step(model, *specs, loop=trainer.loop)
        except Exception as error:  # a model that does not trace cannot compile either
            message = f"{type(error).__name__}: {error}".splitlines()[0]
            checks.append(CheckResult("train_step_traces", "fail", message))
            return PreflightReport(title, checks + _skipped(STEP_CHECKS, "the step did not trace"))
        checks.append(CheckResult("train_step_traces", "pass", "forward, loss, gradients, update"))
        checks.append(check_memory(model, batch, trainer.accelerator_memory_gib))
        checks += check_graph(graph, model)
        checks.append(check_xla_compile(step, specs))
        if checks[-1].status == "fail":
            checks += _skipped(STEP_CHECKS[-2:], "the step did not compile")
        else:
            checks.append(check_step_runs(step, specs, dataset.num_classes))
            checks.append(
                check_steps_per_execution(
                    step, specs, policy.steps_per_execution, _epoch_steps(trainer)
                )
            )
    return PreflightReport(title, checks)


def _skipped(names: tuple[str, ...], reason: str) -> list[CheckResult]:
    return [CheckResult(name, "skip", f"not run: {reason}") for name in names]


def require_preflight(
    dataset: DatasetConfig,
    trainer: TrainerConfig,
    replicas: int,
    transform_output: tft.TFTransformOutput | None = None,
) -> PreflightReport:
    """Runs preflight and raises PreflightError with the report if any check fails."""
    report = run_preflight(dataset, trainer, replicas=replicas, transform_output=transform_output)
    if not report.passed:
        raise PreflightError(report.to_text())
    return report
