"""Preflight's scan of the traced step's graph: what a TPU cannot compile, named by layer and op.

Static shapes, no float64, and no op without an XLA kernel: each finding names
the innermost Keras layer the op belongs to, so a user's model points at its
own layer, not at TensorFlow internals.
"""

from __future__ import annotations

import functools

import tensorflow as tf
import tf_keras
from tensorflow.python.framework import kernels

from tpu_pipeline.components.preflight.report import CheckResult, named

# The checks this module runs, in order.
GRAPH_CHECKS = ("static_shapes", "no_float64", "no_host_ops")
# Kernels that mean "XLA can lower this op"; the TPU's own table is not loadable off a TPU.
_XLA_DEVICES = frozenset({"XLA_CPU_JIT", "XLA_GPU_JIT"})
# Graph plumbing that never reaches the compiled computation.
_GRAPH_ONLY_OPS = frozenset({"Placeholder"})


def _where(op: tf.Operation, layer_names: set[str]) -> str:
    """'layer X, op Y (Type)' for an op inside a Keras layer's name scope, else the op alone."""
    # The innermost layer: a user's model sits inside ours as one layer.
    layer = next((part for part in reversed(op.name.split("/")) if part in layer_names), None)
    where = f"op {op.name} ({op.type})"
    return f"layer {layer}, {where}" if layer else where


def _graph_check(name: str, findings: list[str], ok: str, advice: str) -> CheckResult:
    if findings:
        return CheckResult(name, "fail", f"{named(findings)}. {advice}")
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


def _unused_constant(op: tf.Operation) -> bool:
    """A constant no op reads: pruned from the function before XLA sees it.

    tf.debugging asserts (the pruning wrappers' check of their step counter)
    leave their string messages behind as such constants; the Assert itself
    sits in a cond branch, which XLA compiles to a no-op.
    """
    return op.type == "Const" and not any(output.consumers() for output in op.outputs)


@functools.cache  # a step has thousands of ops of a few dozen types; the registry is fixed
def _has_xla_kernel(op_type: str) -> bool:
    registered = kernels.get_registered_kernels_for_op(op_type).kernel
    return any(kernel.device_type in _XLA_DEVICES for kernel in registered)


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
        if _unused_constant(op):
            continue
        if any(t.dtype == tf.string for t in tensors):
            host.append(f"{_where(op, layer_names)} uses strings")
        elif op.type not in _GRAPH_ONLY_OPS and not _has_xla_kernel(op.type):
            host.append(f"{_where(op, layer_names)} has no XLA kernel")
    wide += [f"variable {v.name}" for v in model.variables if v.dtype == tf.float64]
    static_shapes, no_float64, no_host_ops = GRAPH_CHECKS
    return [
        _graph_check(
            static_shapes,
            dynamic,
            f"all {len(ops)} ops of the step have static shapes",
            "TPUs compile one program per shape: avoid ops whose output size depends on the data "
            "(boolean_mask, unique, where with one argument)",
        ),
        _graph_check(
            no_float64,
            wide,
            "no float64 tensors or variables",
            "TPUs have no float64: use float32",
        ),
        _graph_check(
            no_host_ops,
            host,
            "every op has an XLA kernel; no strings",
            "Move Python, printing and string work out of the model (into Transform or callbacks)",
        ),
    ]
