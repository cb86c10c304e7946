"""The one TensorFlow decode gives exactly the pixels an independent decoder (Pillow) gives."""

from __future__ import annotations

import io

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from tests.components.images.reference import pillow_pixels
from tpu_pipeline.common.config import DatasetConfig
from tpu_pipeline.components.images.decode import decode_encoded_image, decode_encoded_images


def _dataset(shape=(8, 8, 1), **source) -> DatasetConfig:
    return DatasetConfig(
        name="images",
        image_shape=shape,
        pixel_feature="pixels",
        label_feature="label",
        num_classes=10,
        source=source,
    )


def _encode(image: Image.Image, image_format: str, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, image_format, **options)
    return buffer.getvalue()


def _smooth_rgb(height: int, width: int, seed: int = 0) -> np.ndarray:
    """A photo-like RGB image (smooth gradients plus noise), so JPEG keeps detail to compare."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([x * 255 / width, y * 255 / height, (x + y) * 127 / (height + width)], -1)
    return np.clip(base + rng.normal(0, 20, base.shape), 0, 255).astype(np.uint8)


def _images(height: int, width: int) -> dict[str, bytes]:
    rgb = Image.fromarray(_smooth_rgb(height, width))
    gray = rgb.convert("L")
    return {
        "png gray": _encode(gray, "PNG"),
        "png rgb": _encode(rgb, "PNG"),
        "png palette": _encode(rgb.convert("P", palette=Image.Palette.ADAPTIVE), "PNG"),
        "png bilevel": _encode(gray.convert("1"), "PNG"),
        "jpeg gray": _encode(gray, "JPEG", quality=90),
        "jpeg rgb 4:2:0": _encode(rgb, "JPEG", quality=75, subsampling=2),
        "jpeg rgb 4:4:4": _encode(rgb, "JPEG", quality=95, subsampling=0),
        "gif": _encode(rgb.convert("P"), "GIF"),
        "bmp": _encode(rgb, "BMP"),
    }


@pytest.mark.parametrize(
    "dataset",
    [
        _dataset(),
        _dataset(image_value_range=(0.0, 16.0)),
        _dataset((8, 8, 3), image_value_range=(-0.5, 0.5)),
    ],
    ids=["gray", "gray 0-16", "rgb -0.5-0.5"],
)
def test_graph_decoding_matches_example_gen_for_every_encoding(dataset):
    for name, data in _images(8, 8).items():
        expected = pillow_pixels(data, dataset)
        decoded = decode_encoded_image(tf.constant(data), dataset).numpy()
        np.testing.assert_array_equal(decoded, expected, err_msg=name)


@pytest.mark.parametrize("size", [(12, 10), (5, 6)], ids=["down", "up"])
@pytest.mark.parametrize("channels", [1, 3])
def test_resized_images_match_example_gen(size, channels):
    dataset = _dataset((8, 8, channels), resize=True)
    for name, data in _images(*size).items():
        expected = pillow_pixels(data, dataset)
        decoded = decode_encoded_image(tf.constant(data), dataset).numpy()
        np.testing.assert_array_equal(decoded, expected, err_msg=name)


def test_a_batch_decodes_image_by_image():
    dataset = _dataset()
    images = list(_images(8, 8).values())[:3]
    batch = decode_encoded_images(tf.constant(images), dataset).numpy()
    assert batch.shape == (3, 8, 8, 1)
    for data, decoded in zip(images, batch, strict=True):
        np.testing.assert_array_equal(decoded, pillow_pixels(data, dataset))


@pytest.mark.parametrize(
    ("image", "message"),
    [
        (Image.new("RGBA", (8, 8)), "alpha channel"),
        (Image.new("LA", (8, 8)), "alpha channel"),
        (Image.new("L", (9, 8)), "image must be 8x8"),
    ],
)
def test_what_example_gen_refuses_is_refused_with_a_reason(image, message):
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        decode_encoded_image(tf.constant(_encode(image, "PNG")), _dataset())


def test_bytes_that_are_no_image_are_refused():
    with pytest.raises(tf.errors.InvalidArgumentError):
        decode_encoded_image(tf.constant(b"not an image"), _dataset())
