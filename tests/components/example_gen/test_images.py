"""The image check keeps what the user has, refuses what the Trainer could not decode, and
shrinks once only when asked."""

from __future__ import annotations

import io

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from tests.components.example_gen.conftest import real_photos, scan_middle
from tpu_pipeline.common.config import DatasetConfig
from tpu_pipeline.components.example_gen.errors import DataFormatError
from tpu_pipeline.components.example_gen.images import check_image


def _dataset(shape=(100, 100, 3), **source) -> DatasetConfig:
    return DatasetConfig(
        name="photos",
        image_shape=shape,
        pixel_feature="image",
        label_feature="label",
        num_classes=10,
        format="image_folder",
        source=source,
    )


def _encoded(image: Image.Image, image_format: str) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, image_format)
    return buffer.getvalue()


def _noise(width: int, height: int, mode: str = "RGB") -> Image.Image:
    channels = {"RGB": 3, "L": 1}[mode]
    pixels = np.random.default_rng(0).integers(0, 256, (height, width, channels), np.uint8)
    return Image.fromarray(pixels.squeeze(-1) if channels == 1 else pixels, mode)


def _small_photos() -> list[bytes]:
    return [path.read_bytes() for path in real_photos() if path.stat().st_size < 100_000]


def _damaged(photo: bytes) -> dict[str, bytes]:
    """Ways a JPEG gets damaged: cut short, or changed in the middle of its scan."""
    middle = scan_middle(photo)
    changed = {
        f"{name} marker mid-scan": photo[:middle] + marker + photo[middle + 2 :]
        for name, marker in (("SOF", b"\xff\xc0"), ("SOI", b"\xff\xd8"), ("EOI", b"\xff\xd9"))
    }
    return {
        "cut mid-scan": photo[:middle],
        "cut before the end marker": photo[:-2],
        "32 bytes zeroed mid-scan": photo[:middle] + bytes(32) + photo[middle + 32 :],
        "64 bytes removed mid-scan": photo[:middle] + photo[middle + 64 :],
        **changed,
    }


def _refused_by_check(data: bytes) -> bool:
    try:
        check_image(data, _dataset(), "photo")
    except DataFormatError:
        return True
    return False


def _refused_by_tensorflow(data: bytes) -> bool:
    try:
        tf.io.decode_jpeg(data)  # what the Trainer's input decodes, at full size
    except tf.errors.InvalidArgumentError:
        return True
    return False


def test_the_scaled_check_refuses_exactly_the_jpegs_tensorflow_cannot_decode():
    # The check decodes at 1/8 scale; libjpeg still reads the whole entropy-coded stream.
    outcomes = {}
    for index, photo in enumerate(_small_photos()[::10]):
        for damage, data in _damaged(photo).items():
            outcomes[index, damage] = (_refused_by_check(data), _refused_by_tensorflow(data))

    assert all(check == tensorflow for check, tensorflow in outcomes.values())
    for must_fail in ("cut mid-scan", "cut before the end marker", "SOF marker mid-scan"):
        assert all(outcomes[key][0] for key in outcomes if key[1] == must_fail), must_fail
    # Zeroed entropy-coded bytes decode (JPEG has no checksum): TensorFlow takes them too.
    assert not any(outcomes[key][1] for key in outcomes if key[1] == "32 bytes zeroed mid-scan")


@pytest.mark.parametrize("image_format", ["JPEG", "PNG"])
def test_an_image_is_stored_as_its_own_bytes(image_format):
    data = _encoded(_noise(100, 100), image_format)

    checked = check_image(data, _dataset(), "photo")

    assert checked.data == data
    assert (checked.height, checked.width, checked.format) == (100, 100, image_format.lower())


def test_an_image_within_max_image_side_keeps_its_bytes():
    data = _encoded(_noise(300, 200), "JPEG")

    assert check_image(data, _dataset(resize=True, max_image_side=300), "photo").data == data


@pytest.mark.parametrize(
    "image_format, mode, size, expected",
    [
        ("JPEG", "RGB", (400, 200), (128, 64)),
        ("JPEG", "L", (150, 600), (32, 128)),
        ("PNG", "RGB", (200, 400), (64, 128)),
        ("PNG", "P", (256, 256), (128, 128)),
    ],
    ids=["jpeg-wide", "jpeg-gray-tall", "png-tall", "png-palette"],
)
def test_a_larger_image_is_shrunk_once_keeping_its_aspect_and_format(
    image_format, mode, size, expected
):
    image = _noise(*size, "L" if mode == "L" else "RGB")
    if mode == "P":
        image = image.quantize(64)
    dataset = _dataset((32, 32, 3), resize=True, max_image_side=128)

    checked = check_image(_encoded(image, image_format), dataset, "photo")
    stored = Image.open(io.BytesIO(checked.data))

    assert (stored.format, stored.size) == (image_format, expected)
    assert (checked.width, checked.height, checked.format) == (*expected, image_format.lower())
    assert stored.mode == {"P": "RGB"}.get(mode, mode)  # a palette becomes colours


def test_a_shrunk_phone_photo_keeps_its_content_and_exif():
    (big,) = [path for path in real_photos() if path.stat().st_size > 100_000]
    dataset = _dataset(resize=True, max_image_side=256)

    stored = check_image(big.read_bytes(), dataset, str(big)).data

    shrunk, original = Image.open(io.BytesIO(stored)), Image.open(big)
    assert (shrunk.format, shrunk.size) == ("JPEG", (256, 256))
    assert shrunk.getexif() == original.getexif()
    original.draft("RGB", (256, 256))
    reference = np.asarray(original.convert("RGB").resize((256, 256)), np.float32)
    assert np.abs(np.asarray(shrunk, np.float32) - reference).mean() < 4  # of 255


def test_an_image_wider_than_jpegs_limit_is_refused_in_any_format():
    # The schema bounds photo sides by this limit, so ExampleGen must hold every format to it.
    wide = _encoded(Image.new("L", (65_501, 2)), "PNG")
    with pytest.raises(DataFormatError, match=r"^photo: image is 65501x2; images up to 65500 "):
        check_image(wide, _dataset(resize=True), "photo")
    assert check_image(_encoded(Image.new("L", (65_500, 2)), "PNG"), _dataset(resize=True), "p")
