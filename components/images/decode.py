"""Encoded images (PNG, JPEG, GIF, BMP) to pixels in TensorFlow ops: the one definition.

Photos are stored encoded (ExampleGen keeps the bytes), so every consumer decodes
them here: the Transform graph (which the Trainer's evaluation input, TFMA and the
`serving_default` signature apply), the `images` serving signature, the random
crops of training (`random_resized_crop`) and the TFLite measurement. Decoding refuses what
ExampleGen refuses (alpha, other sizes unless `source.resize`), converts between
gray and RGB with integer luma weights, and JPEG uses the accurate integer IDCT,
so an image becomes the same pixels wherever it is decoded.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from tpu_pipeline.common.config import DatasetConfig

# Integer luma weights: L = (R*19595 + G*38470 + B*7471 + 0x8000) >> 16 (Pillow's "L").
_LUMA_WEIGHTS = (19595, 38470, 7471)
# The accurate integer IDCT: TensorFlow's default (fast) differs by up to 9 levels.
JPEG_DCT_METHOD = "INTEGER_ACCURATE"
MAX_8BIT = 255.0


# JPEG's own downscaling while decoding (libjpeg's DCT scaling), largest first.
JPEG_RATIOS = (8, 4, 2)
# Up to this shrink factor plain bilinear keeps detail; beyond it, antialiasing prevents
# aliasing (at about twice the cost of the decode, so it is spent only where needed).
PLAIN_BILINEAR_MAX_SHRINK = 2.0


def resize_pixels(image: tf.Tensor, height: int, width: int) -> tf.Tensor:
    """Bilinear resize, rounded to whole 8-bit values like a resized image.

    Antialiased when shrinking by more than `PLAIN_BILINEAR_MAX_SHRINK`; JPEGs
    mostly arrive within that factor already (`decode_jpeg_near`).
    """
    pixels = tf.cast(image, tf.float32)
    size = tf.cast(tf.shape(image)[:2], tf.float32)
    shrink = tf.reduce_max(size / tf.constant([height, width], tf.float32))

    def resize(antialias: bool) -> tf.Tensor:
        return tf.image.resize(pixels, [height, width], method="bilinear", antialias=antialias)

    resized = tf.cond(
        shrink > PLAIN_BILINEAR_MAX_SHRINK, lambda: resize(True), lambda: resize(False)
    )
    return tf.clip_by_value(tf.round(resized), 0.0, MAX_8BIT)


def decode_jpeg_near(
    encoded: tf.Tensor, height: int, width: int, window: tf.Tensor | None = None
) -> tf.Tensor:
    """Decodes a JPEG (or a [top, left, rows, columns] `window` of it) at the smallest of
    1/8, 1/4, 1/2 or full scale that still covers `height` x `width`.

    libjpeg scales in the DCT, so a 12-megapixel phone photo for a 224x224 model
    decodes at 1/8 of the work; photos already near the model's size decode whole.
    A window is cut from the decoded image rather than decoded alone: measured
    here, `tf.io.decode_and_crop_jpeg` took 4x a whole decode of a 533x400 photo,
    and with a DCT ratio it took as long as decoding at full size (11 ms against
    0.35 ms for a 3024x3024 photo at 1/8).
    """
    size = window[2:] if window is not None else tf.io.extract_jpeg_shape(encoded)[:2]
    room = tf.reduce_min(tf.cast(size, tf.float32) / tf.constant([height, width], tf.float32))

    def decode(ratio: int):
        def run() -> tf.Tensor:
            image = tf.io.decode_jpeg(encoded, ratio=ratio, dct_method=JPEG_DCT_METHOD)
            if window is None:
                return image
            top, left, rows, columns = tf.unstack(window // ratio)  # in the scaled pixels
            return image[top : top + rows, left : left + columns]

        return run

    branches = [(room >= ratio, decode(ratio)) for ratio in JPEG_RATIOS]
    return tf.case(branches, default=decode(1), exclusive=False)


def scale_pixels(pixels: Any, dataset: DatasetConfig) -> Any:
    """Maps float 8-bit values 0..255 onto `source.image_value_range` (identity by default).

    Plain arithmetic, so it runs on numpy arrays and on tensors alike, with the
    same float32 rounding.
    """
    low, high = dataset.source.image_value_range
    if (low, high) == (0.0, MAX_8BIT):
        return pixels
    return low + pixels * ((high - low) / MAX_8BIT)


def unit_range(pixels: tf.Tensor) -> tf.Tensor:
    """8-bit pixel values 0..255 as the model's input, 0..1 (each backbone rescales from there)."""
    return tf.cast(pixels, tf.float32) / MAX_8BIT


def _to_gray(image: tf.Tensor) -> tf.Tensor:
    weighted = tf.cast(image, tf.int32) * tf.constant(_LUMA_WEIGHTS, tf.int32)
    luma = tf.bitwise.right_shift(tf.reduce_sum(weighted, axis=-1, keepdims=True) + 0x8000, 16)
    return tf.cast(luma, tf.uint8)


def to_channels(image: tf.Tensor, channels: int) -> tf.Tensor:
    """A decoded image [h, w, found] as gray or RGB; an alpha channel is an error (when run)."""
    found = tf.shape(image)[2]
    no_alpha = tf.debugging.assert_equal(
        found % 2, 1, message="image has an alpha channel; send grayscale or RGB without alpha"
    )
    with tf.control_dependencies([no_alpha]):
        if channels == 1:
            return tf.cond(found == 1, lambda: image[..., :1], lambda: _to_gray(image[..., :3]))
        return tf.cond(
            found == 1, lambda: tf.tile(image[..., :1], [1, 1, 3]), lambda: image[..., :3]
        )


def decode_near(encoded: tf.Tensor, height: int, width: int) -> tf.Tensor:
    """The image's pixels, uint8 [h, w, channels as stored]; JPEGs scaled down while decoding
    as far as they still cover `height` x `width`, other formats at their own size."""
    return tf.cond(
        tf.io.is_jpeg(encoded),
        lambda: decode_jpeg_near(encoded, height, width),
        lambda: tf.io.decode_image(encoded, expand_animations=False),
    )


def stored_size(encoded: tf.Tensor, decoded: tf.Tensor) -> tf.Tensor:
    """[height, width] of the image as stored (a JPEG may have been decoded smaller)."""
    return tf.cond(
        tf.io.is_jpeg(encoded),
        lambda: tf.io.extract_jpeg_shape(encoded)[:2],
        lambda: tf.shape(decoded)[:2],
    )


def decode_encoded_image(encoded: tf.Tensor, dataset: DatasetConfig) -> tf.Tensor:
    """One encoded image (a string scalar) -> float32 [height, width, channels] pixels.

    Whole images are resized to `image_shape` (evaluation and serving see the whole
    photo; training crops first, `random_resized_crop`). Values are 0..255, for pixel data
    mapped by `source.image_value_range`.

    Raises (when run):
      tf.errors.InvalidArgumentError: not an image, an alpha channel, or
        another size than `image_shape` without `source.resize`.
    """
    height, width, channels = dataset.image_shape
    image = decode_near(encoded, height, width)
    size = tf.shape(image)[:2]
    checks = []
    if not dataset.source.resize:
        checks.append(
            tf.debugging.assert_equal(
                stored_size(encoded, image),
                tf.constant([height, width]),
                message=f"image must be {width}x{height} (this model does not resize images)",
            )
        )
    with tf.control_dependencies(checks):
        image = to_channels(image, channels)
    pixels = tf.cond(
        tf.reduce_all(size == [height, width]),
        lambda: tf.cast(image, tf.float32),
        lambda: resize_pixels(image, height, width),
    )
    if not dataset.stores_encoded_images:  # photos stay 0..255 (the `pixels` signature's input)
        pixels = scale_pixels(pixels, dataset)
    return tf.ensure_shape(pixels, [height, width, channels])


def decode_encoded_images(encoded: tf.Tensor, dataset: DatasetConfig) -> tf.Tensor:
    """A batch of encoded images [batch] -> float32 [batch, height, width, channels]."""
    return tf.map_fn(
        lambda one: decode_encoded_image(one, dataset),
        encoded,
        fn_output_signature=tf.TensorSpec(dataset.image_shape, tf.float32),
    )


# Random resized crops of encoded photos for training: the ImageNet recipe (ResNet,
# EfficientNet). Each training image is a random window covering `area_range` of the photo
# (aspect ratio between 3/4 and 4/3), resized to the model's size, so every epoch sees new
# framings at full resolution; evaluation and serving see the whole photo
# (`decode_encoded_image`). JPEGs decode scaled down in the DCT as far as the window still
# covers the model's size (`decode_jpeg_near`). The decode, the channel conversion and the
# resize are the ones above, so a crop of the whole photo is the pixels serving sees.
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
