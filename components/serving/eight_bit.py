"""The `pixels` signature of 8-bit pixel data: float pixels in, the Transform graph's floats out.

ExampleGen stores IDX and CIFAR-10 pixels as bytes (`stores_8bit_pixels`), so the
Transform graph takes bytes, which TFLite and TF.js cannot build from floats. But
8-bit pixels have 256 values: the graph's output for each one, read once at export,
is a table the signature looks its input up in. The floats are the graph's own
(the Beam pass's min-max scaling, not a copy of it), in ops TFLite and TF.js run.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tensorflow as tf
from tpu_pipeline.common.config import DatasetConfig
from tpu_pipeline.components.contract import IMAGE_KEY

EIGHT_BIT_VALUES = 256


def scaled_8bit_values(
    transform_layer: Callable[[dict[str, tf.Tensor]], dict[str, tf.Tensor]], dataset: DatasetConfig
) -> tf.Tensor:
    """float32 [256]: what the Transform graph makes of each 8-bit value 0..255."""
    pixel_count = dataset.pixel_count
    # Every value once, in as few examples as hold them (the graph scales every pixel alike).
    rows = -(-EIGHT_BIT_VALUES // pixel_count)
    probe = np.resize(np.arange(EIGHT_BIT_VALUES, dtype=np.uint8), (rows, pixel_count))
    raw = tf.constant([[row.tobytes()] for row in probe])
    scaled = transform_layer({dataset.pixel_feature: raw})[IMAGE_KEY]
    return tf.constant(tf.reshape(scaled, [-1])[:EIGHT_BIT_VALUES].numpy())


def scale_8bit_pixels(pixels: tf.Tensor, scaled_values: tf.Tensor) -> tf.Tensor:
    """Float pixels (whole 0..255 values; others are rounded and clipped) -> the graph's floats.

    A table lookup has no gradient, which attributions (`components/explain/`) need: its
    gradient is the table's slope from each value to the next, as if the graph's scaling
    were drawn through the 256 points. The answer itself stays the lookup.
    """

    @tf.custom_gradient
    def lookup(values: tf.Tensor) -> tuple[tf.Tensor, Callable[[tf.Tensor], tf.Tensor]]:
        index = tf.cast(tf.clip_by_value(tf.round(values), 0.0, 255.0), tf.int32)
        slopes = scaled_values[1:] - scaled_values[:-1]

        def gradient(upstream: tf.Tensor) -> tf.Tensor:
            return upstream * tf.gather(slopes, tf.minimum(index, EIGHT_BIT_VALUES - 2))

        return tf.gather(scaled_values, index), gradient

    return lookup(pixels)
