"""The Transform step: raw pixel lists or encoded photos in, scaled image tensors out.

TFX runs `preprocessing_fn` over the training data with Beam and saves the result
as a TensorFlow graph. The Trainer's evaluation input, TFMA and the serving
signatures apply that same graph, so training and serving can never scale or
decode pixels differently. Pixel data is scaled by its range, which one Beam pass
computes (8-bit pixels stored as bytes are decoded to the same floats first).
Photos are decoded and resized in the graph (`components/images/`) and scaled
by the fixed 8-bit range: no analyzer, so Transform's Beam pass does not decode
a single photo.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
import tensorflow_transform as tft

from tpu_pipeline.components.contract import IMAGE_KEY, LABEL_KEY, read_dataset
from tpu_pipeline.components.images.decode import decode_encoded_images, unit_range
from tpu_pipeline.components.images.examples import decode_8bit_pixels


def preprocessing_fn(
    inputs: dict[str, tf.Tensor], custom_config: dict[str, Any]
) -> dict[str, tf.Tensor]:
    """Images scaled to [0, 1]: pixels by the data's range, photos decoded and resized.

    Args:
      inputs: batch of raw features parsed with the curated schema: the pixel
        feature as float [batch, pixels], or bytes [batch, 1]: 8-bit pixels or an
        encoded photo; the label as int64 [batch, 1].
      custom_config: `{"dataset": DatasetConfig fields}` from the pipeline.

    Returns:
      `image`: float32 [batch, height, width, channels]; `label`: int64 [batch].
      Serving applies only the part of the graph that `image` needs.
    """
    dataset = read_dataset(custom_config)
    if dataset.stores_encoded_images:
        encoded = tf.reshape(inputs[dataset.pixel_feature], [-1])
        images = unit_range(decode_encoded_images(encoded, dataset))
    else:
        stored = inputs[dataset.pixel_feature]
        if dataset.stores_8bit_pixels:
            pixels = decode_8bit_pixels(stored, dataset)
        else:
            pixels = tf.cast(stored, tf.float32)
        scaled = tft.scale_by_min_max(pixels, output_min=0.0, output_max=1.0)
        images = tf.reshape(scaled, [-1, *dataset.image_shape])
    return {
        IMAGE_KEY: images,
        LABEL_KEY: tf.reshape(tf.cast(inputs[dataset.label_feature], tf.int64), [-1]),
    }
