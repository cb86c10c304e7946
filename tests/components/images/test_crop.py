"""Random resized crops: a window of the photo at the model's size, the same ops as serving."""

import io

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from benchmarks.data import photo_dataset
from tpu_pipeline.components.images.decode import decode_encoded_image, random_resized_crop


def _photo(fmt: str, size=(120, 80)) -> bytes:
    """A photo whose left half is dark and right half bright (so crops differ)."""
    pixels = np.zeros((size[1], size[0], 3), np.uint8)
    pixels[:, size[0] // 2 :] = 220
    pixels[..., 1] = np.arange(size[1], dtype=np.uint8)[:, None]
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format=fmt)
    return buffer.getvalue()


DATASET = photo_dataset((32, 32, 3), classes=2)


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_a_crop_has_the_model_size_and_8bit_values(fmt):
    tf.random.set_seed(1)
    crop = random_resized_crop(tf.constant(_photo(fmt)), DATASET.image_shape, (0.25, 1.0))

    assert crop.shape == (32, 32, 3) and crop.dtype == tf.float32
    assert 0.0 <= float(tf.reduce_min(crop)) and float(tf.reduce_max(crop)) <= 255.0


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_crops_differ_from_draw_to_draw(fmt):
    tf.random.set_seed(2)
    photo = tf.constant(_photo(fmt))
    crops = [random_resized_crop(photo, DATASET.image_shape, (0.1, 0.3)).numpy() for _ in range(6)]

    assert len({crop.tobytes() for crop in crops}) > 1


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_a_crop_of_the_whole_photo_is_what_evaluation_and_serving_see(fmt):
    photo = tf.constant(_photo(fmt))

    whole = random_resized_crop(photo, DATASET.image_shape, (1.0, 1.0))

    # Aspect 3:2 is outside 3/4..4/3: the sampler falls back to the whole photo.
    np.testing.assert_array_equal(whole.numpy(), decode_encoded_image(photo, DATASET).numpy())


def test_a_gray_photo_becomes_three_channels():
    buffer = io.BytesIO()
    Image.fromarray(np.full((40, 40), 90, np.uint8)).save(buffer, format="PNG")

    crop = random_resized_crop(tf.constant(buffer.getvalue()), (16, 16, 3), (0.5, 1.0))

    assert crop.shape == (16, 16, 3)
    np.testing.assert_array_equal(crop.numpy(), np.full((16, 16, 3), 90.0))


def test_a_large_jpeg_decodes_scaled_down_to_nearly_the_full_decodes_pixels():
    big = tf.constant(_photo("JPEG", size=(1600, 1200)))
    dataset = DATASET.model_copy(update={"image_shape": (48, 64, 3)})

    scaled = decode_encoded_image(big, dataset).numpy()

    full = tf.image.resize(tf.io.decode_jpeg(big), [48, 64], antialias=True).numpy()
    assert scaled.shape == (48, 64, 3)
    assert np.abs(scaled - full).mean() < 2.0  # of 255: the same picture
