"""A reference decoder for tests: an image's pixels as Pillow decodes them.

The product decodes in TensorFlow (`components/images/decode.py`); an independent
decoder proves those pixels are the image's, channel conversion and JPEG IDCT included.
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from tpu_pipeline.common.config import DatasetConfig
from tpu_pipeline.components.images.decode import resize_pixels, scale_pixels

_MODE_FOR_CHANNELS = {1: "L", 3: "RGB"}


def pillow_pixels(data: bytes, dataset: DatasetConfig) -> np.ndarray:
    """float32 [height, width, channels] of `dataset.image_shape`, as `decode_encoded_image`."""
    height, width, channels = dataset.image_shape
    image = Image.open(io.BytesIO(data))
    converted = image.convert(_MODE_FOR_CHANNELS[channels])
    pixels = np.asarray(converted, dtype=np.float32).reshape(image.height, image.width, channels)
    if image.size != (width, height):
        pixels = resize_pixels(pixels, height, width).numpy()
    return scale_pixels(pixels, dataset)
