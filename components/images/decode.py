"""Encoded images (PNG, JPEG, GIF, BMP) to pixels in TensorFlow ops, as ExampleGen makes them.

ExampleGen decodes images with Pillow; the `images` serving signature cannot
call Pillow, so it decodes in the graph with settings that give Pillow's
pixels (JPEG with the accurate integer IDCT, RGB to gray with Pillow's integer
luma weights), refuses what ExampleGen refuses (alpha, other sizes unless
`source.resize`) and shares the two steps that must match by construction:
`resize_pixels` and `scale_pixels`. tests/components/test_encoded_images.py
holds the two paths to the same pixels.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from common.config import DatasetConfig

# Pillow's "L" conversion: L = (R*19595 + G*38470 + B*7471 + 0x8000) >> 16.
_LUMA_WEIGHTS = (19595, 38470, 7471)


def resize_pixels(image: tf.Tensor, height: int, width: int) -> tf.Tensor:
    """Bilinear resize with antialiasing, rounded to whole 8-bit values like a resized image."""
    resized = tf.image.resize(
        tf.cast(image, tf.float32), [height, width], method="bilinear", antialias=True
    )
    return tf.clip_by_value(tf.round(resized), 0.0, 255.0)


def scale_pixels(pixels: Any, dataset: DatasetConfig) -> Any:
    """Maps float 8-bit values 0..255 onto `source.image_value_range` (identity by default).

    Plain arithmetic, so ExampleGen runs it on numpy arrays (no TensorFlow op per
    image) and the serving graph on tensors, with the same float32 rounding.
    """
    low, high = dataset.source.image_value_range
    if (low, high) == (0.0, 255.0):
        return pixels
    return low + pixels * ((high - low) / 255.0)


def _to_gray(image: tf.Tensor) -> tf.Tensor:
    weighted = tf.cast(image, tf.int32) * tf.constant(_LUMA_WEIGHTS, tf.int32)
    luma = tf.bitwise.right_shift(tf.reduce_sum(weighted, axis=-1, keepdims=True) + 0x8000, 16)
    return tf.cast(luma, tf.uint8)


def decode_encoded_image(encoded: tf.Tensor, dataset: DatasetConfig) -> tf.Tensor:
    """One encoded image (a string scalar) -> float32 [height, width, channels] pixels.

    Raises (when run):
      tf.errors.InvalidArgumentError: not an image, an alpha channel, or
        another size than `image_shape` without `source.resize`.
    """
    height, width, channels = dataset.image_shape
    image = tf.cond(
        tf.io.is_jpeg(encoded),
        # Pillow decodes JPEG with libjpeg's accurate integer IDCT; TF's default differs by up to 9.
        lambda: tf.io.decode_jpeg(encoded, dct_method="INTEGER_ACCURATE"),
        lambda: tf.io.decode_image(encoded, expand_animations=False),
    )
    found = tf.shape(image)[2]
    size = tf.shape(image)[:2]
    checks = [
        tf.debugging.assert_equal(
            found % 2,
            1,
            message="image has an alpha channel; send grayscale or RGB without alpha",
        )
    ]
    if not dataset.source.resize:
        checks.append(
            tf.debugging.assert_equal(
                size,
                tf.constant([height, width]),
                message=f"image must be {width}x{height} (this model does not resize images)",
            )
        )
    with tf.control_dependencies(checks):
        if channels == 1:
            image = tf.cond(found == 1, lambda: image[..., :1], lambda: _to_gray(image[..., :3]))
        else:
            image = tf.cond(
                found == 1, lambda: tf.tile(image[..., :1], [1, 1, 3]), lambda: image[..., :3]
            )
    pixels = tf.cond(
        tf.reduce_all(size == [height, width]),
        lambda: tf.cast(image, tf.float32),
        lambda: resize_pixels(image, height, width),
    )
    return tf.ensure_shape(scale_pixels(pixels, dataset), [height, width, channels])


def decode_encoded_images(encoded: tf.Tensor, dataset: DatasetConfig) -> tf.Tensor:
    """A batch of encoded images [batch] -> float32 [batch, height, width, channels]."""
    return tf.map_fn(
        lambda one: decode_encoded_image(one, dataset),
        encoded,
        fn_output_signature=tf.TensorSpec(dataset.image_shape, tf.float32),
    )
