"""Runs every preflight check in order, skipping by named group what cannot run after a failure.

The groups say what each check needs: the configuration alone, the built
model, the traced step, or the compiled step. A check added to a group is
skipped with it; none is found by its position.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras

from tpu_pipeline.common.config import ConfigError, DatasetConfig, TrainerConfig
from tpu_pipeline.components.contract import IMAGE_KEY, LABEL_KEY
from tpu_pipeline.components.models import build_model, compile_model
from tpu_pipeline.components.preflight.config_checks import (
    check_batch_split,
    check_policy,
    check_static_input,
    input_specs,
)
from tpu_pipeline.components.preflight.graph_scan import GRAPH_CHECKS, check_graph
from tpu_pipeline.components.preflight.memory import check_memory
from tpu_pipeline.components.preflight.report import (
    CheckResult,
    PreflightError,
    PreflightReport,
    error_line,
    skipped,
)
from tpu_pipeline.components.preflight.step_checks import (
    check_float32_outputs,
    check_step_runs,
    check_steps_per_execution,
    check_xla_compile,
    trace_train_step,
)
from tpu_pipeline.components.training.input_pipeline import global_batch_size
from tpu_pipeline.components.training.learning_rate import make_optimizer
from tpu_pipeline.components.training.pruning import prune_for_training

# Cores of one TPU v2-8 / v3-8 board: the smallest common TPU slice.
DEFAULT_TPU_REPLICAS = 8

# What each check needs, in the order they run.
CONFIG_CHECKS = ("tpu_policy", "batch_split", "static_input")
MODEL_CHECKS = ("model_builds", "float32_outputs", "train_step_traces")
TRACED_STEP_CHECKS = ("accelerator_memory", *GRAPH_CHECKS, "xla_compile")
COMPILED_STEP_CHECKS = ("train_step_runs", "steps_per_execution")
ALL_CHECKS = CONFIG_CHECKS + MODEL_CHECKS + TRACED_STEP_CHECKS + COMPILED_STEP_CHECKS

ModelBuilder = Callable[[str], tf_keras.Model]


def _epoch_steps(trainer: TrainerConfig) -> int | None:
    return None if trainer.train_steps is None else max(1, trainer.train_steps // trainer.epochs)


def _planned_steps(trainer: TrainerConfig) -> int:
    """Steps the pruning schedule spans; any count traces the same ops (preflight reads no data)."""
    return trainer.train_steps or trainer.epochs


def _after(group: tuple[str, ...], name: str) -> tuple[str, ...]:
    """The checks of `group` that come after `name`."""
    return group[group.index(name) + 1 :]


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
        unrun = MODEL_CHECKS + TRACED_STEP_CHECKS + COMPILED_STEP_CHECKS
        return PreflightReport(title, checks + skipped(unrun, "needs tpu_policy and static_input"))

    with tf.device("/CPU:0"):
        try:
            model = builder(policy.precision)
            if trainer.pruning:  # the wrappers' mask updates are part of the step TPUs compile
                model = prune_for_training(model, trainer.pruning, _planned_steps(trainer))
        except ConfigError as error:  # the user's model: cannot import, wrong output...
            checks.append(CheckResult("model_builds", "fail", str(error)))
            unrun = _after(MODEL_CHECKS, "model_builds") + TRACED_STEP_CHECKS
            return PreflightReport(
                title, checks + skipped(unrun + COMPILED_STEP_CHECKS, "no model")
            )
        checks.append(CheckResult("model_builds", "pass", f"{model.count_params():,} parameters"))
        optimizer = make_optimizer(trainer, global_batch_size(batch, replicas), 1, trainer.epochs)
        compile_model(
            model,
            optimizer,
            jit_compile=True,
            precision=policy.precision,
            label_smoothing=trainer.label_smoothing,
        )
        checks.append(check_float32_outputs(model))
        specs = [tensor_specs[IMAGE_KEY], tensor_specs[LABEL_KEY]]
        try:
            step, graph = trace_train_step(model, *specs, loop=trainer.loop)
        except Exception as error:  # a model that does not trace cannot compile either
            checks.append(CheckResult("train_step_traces", "fail", error_line(error)))
            unrun = TRACED_STEP_CHECKS + COMPILED_STEP_CHECKS
            return PreflightReport(title, checks + skipped(unrun, "the step did not trace"))
        checks.append(CheckResult("train_step_traces", "pass", "forward, loss, gradients, update"))
        checks.append(check_memory(model, batch, trainer.accelerator_memory_gib))
        checks += check_graph(graph, model)
        compiled = check_xla_compile(step, specs)
        checks.append(compiled)
        if compiled.status == "fail":
            checks += skipped(COMPILED_STEP_CHECKS, "the step did not compile")
        else:
            checks.append(check_step_runs(step, specs, dataset.num_classes))
            checks.append(
                check_steps_per_execution(
                    step, specs, policy.steps_per_execution, _epoch_steps(trainer)
                )
            )
    return PreflightReport(title, checks)


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
