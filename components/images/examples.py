"""The pixels and labels of ExampleGen's examples, whichever way their images are stored.

What the `pixels` serving signature (and so TFLite and TF.js) takes: float values
[n, height, width, channels] as the data holds them (8-bit pixels stored as bytes
decoded back to the same floats), photos decoded whole and resized by `decode.py`.
The TFLite measurement, the report's samples and the TF.js check read examples
through this one function.
"""

from __future__ import annotations

import tensorflow as tf

from tpu_pipeline.common.config import DatasetConfig
from tpu_pipeline.components.images.decode import decode_encoded_images


def pixel_feature_spec(dataset: DatasetConfig) -> tf.io.FixedLenFeature:
    """How the pixel feature is stored: one encoded image or bytes value of 8-bit pixels, or
    the flat float pixels."""
    if dataset.stores_encoded_images or dataset.stores_8bit_pixels:
        return tf.io.FixedLenFeature([1], tf.string)
    return tf.io.FixedLenFeature([dataset.pixel_count], tf.float32)


def decode_8bit_pixels(stored: tf.Tensor, dataset: DatasetConfig) -> tf.Tensor:
    """The pixel feature of `stores_8bit_pixels` examples [n, 1] -> float32 [n, pixel_count].

    The floats ExampleGen stored before it kept the bytes: every uint8 is exact as a float.
    A value of another length fails when run (InvalidArgumentError).
    """
    pixels = tf.io.decode_raw(tf.reshape(stored, [-1]), tf.uint8)
    return tf.cast(tf.ensure_shape(pixels, [None, dataset.pixel_count]), tf.float32)


def _stored_pixels(stored: tf.Tensor, dataset: DatasetConfig) -> tf.Tensor:
    """The parsed pixel feature [n, ...] -> pixels [n, height, width, channels]."""
    if dataset.stores_8bit_pixels:
        return tf.reshape(decode_8bit_pixels(stored, dataset), [-1, *dataset.image_shape])
    if dataset.stores_encoded_images:
        return decode_encoded_images(tf.reshape(stored, [-1]), dataset)
    return tf.reshape(stored, [-1, *dataset.image_shape])


def parse_pixels(serialized: tf.Tensor, dataset: DatasetConfig) -> tuple[tf.Tensor, tf.Tensor]:
    """A batch of serialized examples -> (pixels [n, height, width, channels], labels [n])."""
    spec = {
        dataset.pixel_feature: pixel_feature_spec(dataset),
        dataset.label_feature: tf.io.FixedLenFeature([1], tf.int64),
    }
    parsed = tf.io.parse_example(serialized, spec)
    return _stored_pixels(parsed[dataset.pixel_feature], dataset), parsed[dataset.label_feature][
        :, 0
    ]


def parse_images(serialized: tf.Tensor, dataset: DatasetConfig) -> tf.Tensor:
    """A batch of serialized examples, labelled or not -> pixels [n, height, width, channels]."""
    spec = {dataset.pixel_feature: pixel_feature_spec(dataset)}
    return _stored_pixels(tf.io.parse_example(serialized, spec)[dataset.pixel_feature], dataset)
