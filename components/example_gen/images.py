"""Decodes PNG/JPEG bytes into the configured image shape, for image folders and TFRecords.

Images are decoded in ExampleGen, so the examples hold float pixels like every
other format and the Transform graph and the Trainer stay unchanged. Grayscale
and RGB convert into each other; an alpha channel is refused rather than
silently dropped, and other sizes are errors unless `source.resize` is on. The
`images` serving signature decodes the same way in TensorFlow ops
(`components/images/decode.py`) and shares the resize and the value scaling
with this module, so a served image becomes the pixels training saw.
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from common.config import DatasetConfig
from components.example_gen.errors import DataFormatError
from components.images.decode import resize_pixels, scale_pixels

# 8-bit modes that hold gray or colour values only (P is a palette of colours).
_CONVERTIBLE_MODES = {"1": 1, "L": 1, "RGB": 3, "P": 3}
_MODE_FOR_CHANNELS = {1: "L", 3: "RGB"}


def decode_image(data: bytes, dataset: DatasetConfig, where: str) -> np.ndarray:
    """Returns the image as float32 [height, width, channels] of the configured shape.

    8-bit values become `source.image_value_range` (0-255 unless configured).

    Raises:
      DataFormatError: the bytes are no decodable image, the image has an alpha
        or other unexpected channel layout, or another size without `resize`.
    """
    height, width, channels = dataset.image_shape
    if channels not in _MODE_FOR_CHANNELS:
        raise DataFormatError(f"{where}: images can become 1 or 3 channels, not {channels}")
    try:
        image = Image.open(io.BytesIO(data))
        image.load()
    except (OSError, ValueError, Image.DecompressionBombError) as error:
        raise DataFormatError(f"{where}: cannot decode the image: {error}") from None
    if image.mode not in _CONVERTIBLE_MODES or "transparency" in image.info:
        bands = len(image.getbands())
        raise DataFormatError(
            f"{where}: image mode {image.mode} ({bands} channels) is not grayscale or RGB; "
            f"expected {channels} channel(s) without alpha"
        )
    if image.size != (width, height):
        if not dataset.source.resize:
            raise DataFormatError(
                f"{where}: image is {image.width}x{image.height}, expected {width}x{height} "
                "(set dataset.source.resize: true to resize images of other sizes)"
            )
    converted = image.convert(_MODE_FOR_CHANNELS[channels])
    pixels = np.asarray(converted, dtype=np.float32).reshape(image.height, image.width, channels)
    if image.size != (width, height):
        pixels = resize_pixels(pixels, height, width).numpy()
    return scale_pixels(pixels, dataset)
