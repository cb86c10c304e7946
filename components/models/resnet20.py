"""ResNet-20 for small images (He et al., 2016, CIFAR-10 variant), with BatchNorm.

Three stages of three basic blocks (16, 32, 64 filters; stride 2 between stages),
global average pooling, one dense layer: 0.27 M parameters. TPU-friendly: every
shape is static, 'same' padding keeps it valid for 8x8 to 32x32 images, and
BatchNormalization computes its statistics in float32 under the bfloat16 policy.
"""

from __future__ import annotations

import tf_keras

STAGE_FILTERS = (16, 32, 64)
BLOCKS_PER_STAGE = 3


def _conv_bn(x, filters: int, kernel: int, stride: int, name: str, dtype):
    layers = tf_keras.layers
    x = layers.Conv2D(
        filters, kernel, stride, padding="same", use_bias=False, dtype=dtype, name=f"{name}_conv"
    )(x)
    # Momentum 0.9: moving statistics settle within a few hundred steps (short runs).
    return layers.BatchNormalization(momentum=0.9, dtype=dtype, name=f"{name}_bn")(x)


def _basic_block(x, filters: int, stride: int, name: str, dtype):
    """conv-bn-relu-conv-bn plus the input (projected when the shape changes), then relu."""
    layers = tf_keras.layers
    y = _conv_bn(x, filters, 3, stride, f"{name}_a", dtype)
    y = layers.ReLU(dtype=dtype, name=f"{name}_a_relu")(y)
    y = _conv_bn(y, filters, 3, 1, f"{name}_b", dtype)
    if stride != 1 or x.shape[-1] != filters:
        x = _conv_bn(x, filters, 1, stride, f"{name}_shortcut", dtype)
    x = layers.Add(dtype=dtype, name=f"{name}_add")([x, y])
    return layers.ReLU(dtype=dtype, name=f"{name}_relu")(x)


def logits(
    inputs: tf_keras.layers.Layer, num_classes: int, dtype: tf_keras.mixed_precision.Policy
) -> tf_keras.layers.Layer:
    """Class logits of `inputs` (float32 images), computing under the `dtype` policy."""
    layers = tf_keras.layers
    x = _conv_bn(inputs, STAGE_FILTERS[0], 3, 1, "stem", dtype)
    x = layers.ReLU(dtype=dtype, name="stem_relu")(x)
    for stage, filters in enumerate(STAGE_FILTERS, start=1):
        for block in range(1, BLOCKS_PER_STAGE + 1):
            stride = 2 if stage > 1 and block == 1 else 1
            x = _basic_block(x, filters, stride, f"stage{stage}_block{block}", dtype)
    x = layers.GlobalAveragePooling2D(dtype=dtype, name="pool")(x)
    return layers.Dense(num_classes, dtype=dtype, name="logits")(x)
