"""Preflight checks of the configuration and the input, before any model is built."""

from __future__ import annotations

import tensorflow as tf
import tensorflow_transform as tft

from tpu_pipeline.common.config import DatasetConfig, TrainerConfig
from tpu_pipeline.components.contract import IMAGE_KEY, LABEL_KEY
from tpu_pipeline.components.device.policy import TrainingPolicy, resolve_training_policy
from tpu_pipeline.components.preflight.report import CheckResult

# TPUs tile the batch dimension by 8; smaller multiples pad every step.
TPU_BATCH_TILE = 8


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
