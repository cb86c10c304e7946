"""How much accelerator memory one replica's training step needs, before paying for one.

Weights, their gradients and the optimizer's slots are counted exactly from the
built model and optimizer (float32 under every precision policy). Activations
are estimated: every layer's output for the per-replica batch, at the dtype the
layer computes in (bfloat16 under the TPU policy), kept for the backward pass.
XLA fuses element-wise layers (ReLU, BatchNorm, Add) into their neighbours and
frees what the backward pass no longer needs, so the estimate errs high: the
safe side for a "will it fit" check. It does not model the TPU's tiling
padding of small channel counts, which can raise real use for thin layers.
"""

from __future__ import annotations

import dataclasses
import math

import tensorflow as tf
import tf_keras

from components.preflight.report import CheckResult

GIB = 2**30
# Above this share of the accelerator's memory the estimate warns (it errs high, but not by much).
MEMORY_WARN_FRACTION = 0.8


@dataclasses.dataclass(frozen=True)
class MemoryEstimate:
    """Bytes one replica needs during a training step, by kind and by layer."""

    parameters: int
    gradients: int
    optimizer_slots: int
    activations: int
    by_layer: dict[str, int]

    @property
    def total(self) -> int:
        return self.parameters + self.gradients + self.optimizer_slots + self.activations

    def largest(self, count: int = 3) -> list[tuple[str, int]]:
        """The `count` layers that need the most memory, largest first."""
        return sorted(self.by_layer.items(), key=lambda item: -item[1])[:count]


def _bytes(variable: tf.Variable) -> int:
    return variable.shape.num_elements() * variable.dtype.size


def _leaf_layers(model: tf_keras.Model):
    """Every layer, with nested models (a user's model inside ours) opened up."""
    for layer in model.layers:
        if isinstance(layer, tf_keras.Model):
            yield from _leaf_layers(layer)
        else:
            yield layer


def estimate_memory(model: tf_keras.Model, per_replica_batch: int) -> MemoryEstimate:
    """Estimates one replica's memory for a training step of `model`.

    Args:
      model: compiled, with its optimizer built (`optimizer.build(...)`), so the
        slot variables exist and are counted as they are.
      per_replica_batch: examples each replica processes per step.
    """
    trainable = sum(_bytes(v) for v in model.trainable_variables)
    # Slot variables (Adam's moments, momentum); scalars such as the step counter are noise.
    optimizer_variables = model.optimizer.variables
    if callable(optimizer_variables):  # a method on some optimizer wrappers
        optimizer_variables = optimizer_variables()
    slots = sum(_bytes(v) for v in optimizer_variables if v.shape.rank)
    slots_per_byte = slots / max(trainable, 1)
    by_layer, activations = {}, 0
    for layer in _leaf_layers(model):
        outputs = tf.nest.flatten(layer.output)
        size = sum(per_replica_batch * math.prod(t.shape[1:]) * t.dtype.size for t in outputs)
        weights = sum(_bytes(v) for v in layer.weights)
        layer_trainable = sum(_bytes(v) for v in layer.trainable_weights)
        by_layer[layer.name] = (
            size + weights + layer_trainable + round(layer_trainable * slots_per_byte)
        )
        activations += size
    return MemoryEstimate(
        parameters=sum(_bytes(v) for v in model.weights),
        gradients=trainable,
        optimizer_slots=slots,
        activations=activations,
        by_layer=by_layer,
    )


def describe(size: int) -> str:
    """Bytes in the unit a person reads at a glance."""
    for unit, scale in (("GiB", GIB), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


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
