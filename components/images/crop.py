"""Random resized crops of encoded photos for training: the ImageNet recipe (ResNet, EfficientNet).

Each training image is a random window covering `area_range` of the photo (aspect
ratio between 3/4 and 4/3), resized to the model's size, so every epoch sees new
framings at full resolution; evaluation and serving see the whole photo
(`decode.decode_encoded_image`). JPEGs decode scaled down in the DCT as far as
the window still covers the model's size (`decode.decode_jpeg_near`). The
decode, the channel conversion and the resize are `decode.py`'s, so a crop of the
whole photo is the pixels serving sees.
"""

from __future__ import annotations

import tensorflow as tf
from tpu_pipeline.components.images.decode import decode_jpeg_near, resize_pixels, to_channels

ASPECT_RATIO_RANGE = (3 / 4, 4 / 3)
# Tries to find a window that satisfies the ranges before taking the whole photo.
MAX_ATTEMPTS = 10


def _window(image_size: tf.Tensor, area_range: tuple[float, float]) -> tf.Tensor:
    """A random [top, left, height, width] window of an image of `image_size` [h, w, c]."""
    begin, size, _ = tf.image.sample_distorted_bounding_box(
        image_size,
        bounding_boxes=tf.constant([0.0, 0.0, 1.0, 1.0], shape=[1, 1, 4]),
        min_object_covered=area_range[0],
        aspect_ratio_range=ASPECT_RATIO_RANGE,
        area_range=area_range,
        max_attempts=MAX_ATTEMPTS,
        use_image_if_no_bounding_boxes=True,
    )
    return tf.stack([begin[0], begin[1], size[0], size[1]])


def random_resized_crop(
    encoded: tf.Tensor,
    image_shape: tuple[int, int, int],
    area_range: tuple[float, float],
) -> tf.Tensor:
    """One encoded image -> a random window of it, float32 [height, width, channels], 0..255."""
    height, width, channels = image_shape

    def jpeg_window() -> tf.Tensor:
        window = _window(tf.io.extract_jpeg_shape(encoded), area_range)
        return decode_jpeg_near(encoded, height, width, window)

    def other_window() -> tf.Tensor:
        image = tf.io.decode_image(encoded, expand_animations=False)
        top, left, rows, columns = tf.unstack(_window(tf.shape(image), area_range))
        return image[top : top + rows, left : left + columns]

    image = tf.cond(tf.io.is_jpeg(encoded), jpeg_window, other_window)
    pixels = resize_pixels(to_channels(image, channels), height, width)
    return tf.ensure_shape(pixels, image_shape)
