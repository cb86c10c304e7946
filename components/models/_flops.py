"""Counts a Keras model's floating-point operations per example, from its layers' shapes.

Only the layers that dominate a CNN's cost are counted (convolutions and dense
layers, one multiply and one add per weight use); pooling, activations and
the loss are a few percent and are left out, so achieved FLOP/s is, if
anything, under-reported. A layer of our own that convolves says its cost with a
`forward_flops()` method. Training costs about three forward passes: the
forward pass, and the gradients with respect to both inputs and weights.
"""

from __future__ import annotations

import math

import tf_keras

# Forward + backward (input gradients) + backward (weight gradients).
TRAINING_PASSES = 3


def layer_forward_flops(layer: tf_keras.layers.Layer) -> int:
    """Multiply-adds x 2 of one forward pass of `layer` for a single example."""
    if hasattr(layer, "forward_flops"):
        return int(layer.forward_flops())
    if isinstance(layer, tf_keras.layers.Conv2D):
        _, out_height, out_width, out_channels = layer.output_shape
        kernel_height, kernel_width = layer.kernel_size
        in_channels = layer.input_shape[-1] // layer.groups
        per_output = kernel_height * kernel_width * in_channels
        return 2 * out_height * out_width * out_channels * per_output
    if isinstance(layer, tf_keras.layers.Dense):
        inputs = math.prod(layer.input_shape[1:])
        return 2 * inputs * layer.units
    return 0


def forward_flops(model: tf_keras.Model) -> int:
    """FLOPs of one forward pass for one example, summed over the model's layers."""
    return sum(layer_forward_flops(layer) for layer in model.layers)


def training_flops(model: tf_keras.Model) -> int:
    """FLOPs of one training step for one example (forward and backward)."""
    return TRAINING_PASSES * forward_flops(model)
