"""Training augmentation: whole-pixel shifts and flips, per image, shapes unchanged."""

import numpy as np
import pytest
import tensorflow as tf

from benchmarks.data import photo_dataset
from tpu_pipeline.common.config import BUILTIN_DATASETS, DatasetConfig, TrainerConfig
from tpu_pipeline.components.training.augmentation import PHOTO_CROP_AREA, Augmentation


def _pixel_data(image_shape) -> DatasetConfig:
    return DatasetConfig(**{**BUILTIN_DATASETS["digits"], "image_shape": image_shape})


PHOTOS = photo_dataset((96, 96, 3), classes=3)


@pytest.mark.parametrize(
    ("image_shape", "shift"),
    [((28, 28, 1), (2, 2)), ((32, 32, 3), (3, 3)), ((8, 8, 1), (0, 0)), ((40, 20, 1), (4, 2))],
)
def test_shift_is_the_configured_fraction_in_whole_pixels(image_shape, shift):
    augmentation = Augmentation.from_config(TrainerConfig(), _pixel_data(image_shape))
    assert augmentation.max_shift == shift
    assert augmentation.per_batch == (shift != (0, 0))
    assert not augmentation.flip and augmentation.crop_area is None


def test_photos_default_to_random_crops_and_flips_without_shifts():
    augmentation = Augmentation.from_config(TrainerConfig(), PHOTOS)

    assert augmentation == Augmentation(
        max_shift=(0, 0), flip=True, crop_area=PHOTO_CROP_AREA, mirror_border=True
    )


def test_configured_values_win_over_the_defaults_of_the_kind_of_data():
    config = TrainerConfig(random_flip=False, random_shift=0.05, random_crop_area=(1.0, 1.0))

    assert Augmentation.from_config(config, PHOTOS) == Augmentation(
        max_shift=(4, 4), mirror_border=True
    )
    assert Augmentation.from_config(TrainerConfig(random_flip=True), _pixel_data((8, 8, 1))).flip


def _one_dot_batch(size: int = 256) -> np.ndarray:
    images = np.zeros((size, 28, 28, 1), np.float32)
    images[:, 14, 10, 0] = 1.0
    return images


def test_each_image_moves_by_its_own_whole_pixel_offset_within_the_bound():
    tf.random.set_seed(0)
    moved = Augmentation(max_shift=(2, 2))(tf.constant(_one_dot_batch())).numpy()
    assert moved.shape == (256, 28, 28, 1)
    assert np.all(moved.sum(axis=(1, 2, 3)) == 1.0), "a dot away from the border is kept whole"
    rows, columns = np.nonzero(moved[..., 0])[1:]
    row_moves, column_moves = rows - 14, columns - 10
    assert set(row_moves) == set(column_moves) == {-2, -1, 0, 1, 2}
    # Independent draws: not every image moves along the diagonal.
    assert np.any(row_moves != column_moves)


def test_pixels_shifted_in_from_outside_are_zero():
    tf.random.set_seed(1)
    moved = Augmentation(max_shift=(3, 3))(tf.ones((64, 8, 8, 1))).numpy()
    zero_rows = (moved == 0).all(axis=(2, 3)).sum(axis=1)
    assert set(zero_rows) <= {0, 1, 2, 3} and zero_rows.max() > 0


def test_a_shifted_photo_brings_in_its_mirror_image_and_pixel_data_zeros():
    assert not Augmentation.from_config(TrainerConfig(), _pixel_data((28, 28, 1))).mirror_border
    shift = 2
    rows, columns = np.meshgrid(np.arange(1, 9), np.arange(1, 9), indexing="ij")
    image = (10 * rows + columns).astype(np.float32)[None, :, :, None]  # every pixel its own
    tf.random.set_seed(3)
    moved = Augmentation(max_shift=(shift, shift), mirror_border=True)(
        tf.constant(np.repeat(image, 64, axis=0))
    ).numpy()

    mirrored = np.pad(image[0, :, :, 0], shift, mode="reflect")  # the edge row not repeated
    offsets = {
        (top, left)
        for one in moved[..., 0]
        for top in range(2 * shift + 1)
        for left in range(2 * shift + 1)
        if np.array_equal(one, mirrored[top : top + 8, left : left + 8])
    }
    assert len(offsets) > 1 and not np.any(moved == 0)
    assert all(
        any(np.array_equal(one, mirrored[t : t + 8, c : c + 8]) for t, c in offsets)
        for one in moved[..., 0]
    )


def test_flip_mirrors_some_images_and_leaves_the_others():
    tf.random.set_seed(2)
    images = _one_dot_batch(64)
    flipped = Augmentation(flip=True)(tf.constant(images)).numpy()
    mirrored = np.all(flipped == images[:, :, ::-1], axis=(1, 2, 3))
    unchanged = np.all(flipped == images, axis=(1, 2, 3))
    assert np.all(mirrored | unchanged)
    assert 0 < mirrored.sum() < 64


def test_whole_images_flip_by_turns_in_the_input_not_at_random_in_the_batch():
    whole = TrainerConfig(random_flip=True, random_crop_area=(1.0, 1.0), random_shift=0.0)
    alternating = Augmentation.from_config(whole, PHOTOS)
    cropped = Augmentation.from_config(TrainerConfig(), PHOTOS)
    digits = Augmentation.from_config(TrainerConfig(random_flip=True), _pixel_data((28, 28, 1)))

    assert alternating.flip_alternates and digits.flip_alternates
    assert not alternating.per_batch  # the input pipeline flips (by turns), not this call
    images = tf.constant(_one_dot_batch(16))
    np.testing.assert_array_equal(alternating(images).numpy(), images.numpy())
    assert cropped.flip and not cropped.flip_alternates and cropped.random_flip


def test_no_augmentation_returns_the_batch_unchanged():
    images = tf.constant(_one_dot_batch(4))
    assert not Augmentation().per_batch
    np.testing.assert_array_equal(Augmentation()(images).numpy(), images.numpy())
