"""The MNIST CNN of the Cloud TPU guide: Conv 32 -> pool -> Conv 64 -> pool -> Dense 64."""

from __future__ import annotations

import tf_keras


def logits(
    inputs: tf_keras.layers.Layer,
    num_classes: int,
    dtype: tf_keras.mixed_precision.Policy,
    *,
    dropout: float = 0.4,
) -> tf_keras.layers.Layer:
    """Class logits of `inputs` (float32 images), computing under the `dtype` policy."""
    layers = tf_keras.layers
    x = layers.Conv2D(32, 3, padding="same", activation="relu", dtype=dtype, name="conv1")(inputs)
    x = layers.MaxPooling2D(dtype=dtype, name="pool1")(x)
    x = layers.Conv2D(64, 3, padding="same", activation="relu", dtype=dtype, name="conv2")(x)
    x = layers.MaxPooling2D(dtype=dtype, name="pool2")(x)
    x = layers.Flatten(dtype=dtype, name="flatten")(x)
    x = layers.Dropout(dropout, dtype=dtype, name="dropout")(x)
    x = layers.Dense(64, activation="relu", dtype=dtype, name="hidden")(x)
    return layers.Dense(num_classes, name="logits", dtype=dtype)(x)
