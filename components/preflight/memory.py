"""How much accelerator memory one replica's training step needs, before paying for one.

Weights, their gradients and the optimizer's slots are counted exactly from the
built model and optimizer (float32 under every precision policy). Activations
are estimated: the outputs the backward pass keeps, for the per-replica batch, at
the dtype the layer computes in (bfloat16 under the TPU policy). XLA does not keep
what it can recompute inside the backward pass's fusions from a tensor it keeps
anyway: BatchNorm's normalisation, piecewise-linear activations (ReLU), padding and
reshapes are not counted. A smooth activation (swish, sigmoid) keeps its input's
derivative as well as its output: counted twice. Every other layer's output counts
once (convolutions, Add, Multiply, pooling, the inputs). At the peak of the backward
pass the gradients into and out of one layer are live as well: twice the largest
layer output is added.

Measured against XLA's own buffer assignment for one training step on CPU (float32,
224x224, the growth per example between batches 4 and 8), this errs high: 1.3x for
MobileNetV2 and EfficientNet-B0, 1.5x for ResNet-50 and ResNet-20 (counting every
layer's output once, as before, was 1.35x to 3x): the safe side for a "will it fit"
check, close enough to be believed. For the small CNNs at 28x28 XLA also kept their
ReLU outputs and measured up to twice the estimate, in megabytes no accelerator
notices. XLA:CPU keeps bfloat16 buffers in float32, so it could not measure the
bfloat16 figures, which are the float32 ones halved as on a TPU. The TPU's tiling
padding of small channel counts, which can raise real use for thin layers, is not
modelled.
"""

from __future__ import annotations

import dataclasses
import math

import tensorflow as tf
import tf_keras

from tpu_pipeline.components.preflight.report import CheckResult

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


# Outputs XLA recomputes in the backward pass from a tensor it keeps (element-wise or layout).
_RECOMPUTED_LAYERS = (
    tf_keras.layers.BatchNormalization,
    tf_keras.layers.ReLU,
    tf_keras.layers.LeakyReLU,
    tf_keras.layers.ZeroPadding2D,
    tf_keras.layers.Reshape,
    tf_keras.layers.Flatten,
    tf_keras.layers.Rescaling,
    tf_keras.layers.Normalization,
)
_PIECEWISE_LINEAR = frozenset({"linear", "relu", "relu6", "leaky_relu"})


def _kept_outputs(layer: tf_keras.layers.Layer) -> int:
    """How many copies of the layer's output the backward pass keeps: 0, 1 or 2."""
    if isinstance(layer, _RECOMPUTED_LAYERS):
        return 0
    if isinstance(layer, tf_keras.layers.Activation):
        function = getattr(layer.activation, "__name__", "")
        return 0 if function in _PIECEWISE_LINEAR else 2
    return 1


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
    by_layer, activations, largest_output = {}, 0, 0
    for layer in _leaf_layers(model):
        outputs = tf.nest.flatten(layer.output)
        output = sum(per_replica_batch * math.prod(t.shape[1:]) * t.dtype.size for t in outputs)
        largest_output = max(largest_output, output)
        size = _kept_outputs(layer) * output
        weights = sum(_bytes(v) for v in layer.weights)
        layer_trainable = sum(_bytes(v) for v in layer.trainable_weights)
        by_layer[layer.name] = (
            size + weights + layer_trainable + round(layer_trainable * slots_per_byte)
        )
        activations += size
    activations += 2 * largest_output  # the backward pass's gradients at its widest layer
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
