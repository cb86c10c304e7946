"""The Transform step: raw pixel lists in, scaled image tensors out.

TFX runs `preprocessing_fn` once over the training data with Beam to compute
the pixel range, and saves the result as a TensorFlow graph. The Trainer's
input pipeline and the serving signature both apply that same graph, so
training and serving can never scale pixels differently.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
import tensorflow_transform as tft

from components.contract import IMAGE_KEY, LABEL_KEY, read_dataset


def preprocessing_fn(
    inputs: dict[str, tf.Tensor], custom_config: dict[str, Any]
) -> dict[str, tf.Tensor]:
    """Scales pixels to [0, 1] by the data's range and reshapes them to images.

    Args:
      inputs: batch of raw features parsed with the curated schema: the pixel
        feature as float [batch, pixels], the label as int64 [batch, 1].
      custom_config: `{"dataset": DatasetConfig fields}` from the pipeline.

    Returns:
      `image`: float32 [batch, height, width, channels]; `label`: int64 [batch].
      Serving applies only the part of the graph that `image` needs.
    """
    dataset = read_dataset(custom_config)
    pixels = tf.cast(inputs[dataset.pixel_feature], tf.float32)
    scaled = tft.scale_by_min_max(pixels, output_min=0.0, output_max=1.0)
    return {
        IMAGE_KEY: tf.reshape(scaled, [-1, *dataset.image_shape]),
        LABEL_KEY: tf.reshape(tf.cast(inputs[dataset.label_feature], tf.int64), [-1]),
    }
