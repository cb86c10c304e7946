"""Checks PNG/JPEG bytes for image folders and TFRecords, and keeps them encoded.

ExampleGen stores each image's bytes as the user has them (`check_image`): no
decode to floats, no resize, no re-encode, so the examples are about the size
of the source files and ExampleGen's time per image does not depend on
`image_shape`. Pillow reads the header (format, channels, size: no pixels);
grayscale and RGB are accepted, an alpha channel is refused rather than
silently dropped later, and other sizes are errors unless `source.resize` is
on. Then TensorFlow, which the Trainer decodes with, decodes every image once:
a JPEG at 1/8 scale (libjpeg's DCT scaling still reads the whole entropy-coded
stream, so it fails exactly where a full decode fails). Pillow would not do:
it takes a JPEG without its end marker that TensorFlow refuses (measured in
tests/components/example_gen/test_images.py). With `source.max_image_side`,
larger images are shrunk once here.

Every consumer then decodes the stored bytes with the same TensorFlow ops
(`components/images/decode.py`).
"""

from __future__ import annotations

import dataclasses
import io

import tensorflow as tf
from PIL import Image

from tpu_pipeline.common.config import DatasetConfig
from tpu_pipeline.components.example_gen.errors import DataFormatError, op_error_reason

# 8-bit modes that hold gray or colour values only (P is a palette of colours).
_CONVERTIBLE_MODES = {"1": 1, "L": 1, "RGB": 3, "P": 3}
_MODE_FOR_CHANNELS = {1: "L", 3: "RGB"}
# What TensorFlow's decode_image reads (MPO: a JPEG with more pictures after its first).
_TENSORFLOW_FORMATS = {"JPEG", "MPO", "PNG", "GIF", "BMP"}
_JPEG_FORMATS = {"JPEG", "MPO"}
# libjpeg decodes at 1/1, 1/2, 1/4 or 1/8 scale; the smallest still reads every bit.
_CHECK_RATIO = 8
SHRUNK_JPEG_QUALITY = 95
_DECODE_ERRORS = (OSError, ValueError, SyntaxError, Image.DecompressionBombError)
# The largest side ExampleGen takes: JPEG's (libjpeg, which TensorFlow decodes with, refuses
# more: "Maximum supported image dimension is 65500 pixels"; GIF stops at 65,535). PNG and
# BMP could go further, but one bound for every format is what a schema can hold photos to.
MAX_IMAGE_SIDE = 65_500
# The `image_format` values ExampleGen stores (what TensorFlow's decode_image reads).
STORED_FORMATS = ("jpeg", "png", "gif", "bmp")


@dataclasses.dataclass(frozen=True)
class CheckedImage:
    """One image as ExampleGen stores it: its bytes, and what StatisticsGen describes."""

    data: bytes
    height: int
    width: int
    format: str  # one of STORED_FORMATS


def check_image(data: bytes, dataset: DatasetConfig, where: str) -> CheckedImage:
    """Returns the bytes to store for one encoded image, after checking that it decodes.

    The bytes come back unchanged, unless `source.max_image_side` is set and the
    image's longer side exceeds it: then the image is shrunk to that side (aspect
    kept, Lanczos) and re-encoded, as JPEG (quality 95) if it was one, else as PNG.

    Raises:
      DataFormatError: the bytes are no image TensorFlow decodes, the image is cut
        short or broken, has an alpha or other unexpected channel layout, or has
        another size than `image_shape` without `source.resize`.
    """
    image = _open_checked(data, dataset, where)
    image_format = "jpeg" if image.format in _JPEG_FORMATS else image.format.lower()
    side = dataset.source.max_image_side
    if side is not None and max(image.size) > side:
        shrunk, (width, height) = _shrunk(image, side, where)
        return CheckedImage(shrunk, height, width, "jpeg" if image_format == "jpeg" else "png")
    try:
        if image.format in _JPEG_FORMATS:
            tf.io.decode_jpeg(data, ratio=_CHECK_RATIO)
        else:
            tf.io.decode_image(data, expand_animations=False)
    except tf.errors.InvalidArgumentError as error:
        reason = op_error_reason(error).removeprefix("jpeg::Uncompress failed. ")
        raise DataFormatError(
            f"{where}: cannot decode the image: the {image.format} data is cut short or broken "
            f"(TensorFlow, which the Trainer decodes with: {reason})"
        ) from None
    return CheckedImage(data, image.height, image.width, image_format)


def _open_checked(data: bytes, dataset: DatasetConfig, where: str) -> Image.Image:
    """Opens the image (its header only) and checks its format, channels and size."""
    height, width, channels = dataset.image_shape
    if channels not in _MODE_FOR_CHANNELS:
        raise DataFormatError(f"{where}: images can become 1 or 3 channels, not {channels}")
    try:
        image = Image.open(io.BytesIO(data))
    except _DECODE_ERRORS as error:
        raise DataFormatError(f"{where}: cannot decode the image: {error}") from None
    if image.format not in _TENSORFLOW_FORMATS:
        raise DataFormatError(
            f"{where}: image format {image.format} is not one TensorFlow decodes "
            "(JPEG, PNG, GIF, BMP); convert it to PNG or JPEG"
        )
    if max(image.size) > MAX_IMAGE_SIDE:
        raise DataFormatError(
            f"{where}: image is {image.width}x{image.height}; images up to {MAX_IMAGE_SIDE} "
            "pixels a side are read (JPEG's limit, held for every format); shrink it"
        )
    if image.mode not in _CONVERTIBLE_MODES or "transparency" in image.info:
        bands = len(image.getbands())
        raise DataFormatError(
            f"{where}: image mode {image.mode} ({bands} channels) is not grayscale or RGB; "
            f"expected {channels} channel(s) without alpha"
        )
    if image.size != (width, height) and not dataset.source.resize:
        raise DataFormatError(
            f"{where}: image is {image.width}x{image.height}, expected {width}x{height} "
            "(set dataset.source.resize: true to resize images of other sizes)"
        )
    return image


def _load(image: Image.Image, where: str) -> None:
    """Decodes the pixels; a cut or broken image fails here, named."""
    try:
        image.load()
    except _DECODE_ERRORS as error:
        raise DataFormatError(f"{where}: cannot decode the image: {error}") from None


def _shrunk(image: Image.Image, side: int, where: str) -> tuple[bytes, tuple[int, int]]:
    """The image with its longer side made `side` (aspect kept), re-encoded once; its size."""
    original_format = image.format
    extra = {key: image.info[key] for key in ("icc_profile", "exif") if image.info.get(key)}
    try:
        if image.mode in ("1", "P"):  # resample gray or colour values, not palette indices
            image = image.convert("L" if image.mode == "1" else "RGB")
        # For a JPEG, a scaled decode no smaller than twice the result first: fast and sharp.
        image.thumbnail((side, side), Image.Resampling.LANCZOS)
    except _DECODE_ERRORS as error:
        raise DataFormatError(f"{where}: cannot decode the image: {error}") from None
    buffer = io.BytesIO()
    if original_format in _JPEG_FORMATS:
        image.save(buffer, "JPEG", quality=SHRUNK_JPEG_QUALITY, **extra)
    else:
        image.save(buffer, "PNG", **extra)
    return buffer.getvalue(), image.size
