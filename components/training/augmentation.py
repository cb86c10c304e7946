"""Training-time image augmentation: random crops of photos, whole-pixel shifts, flips.

It runs in the tf.data input on the host, as the TPU guides' input functions do, so
the accelerator's compiled step is the same with or without it. Photos (stored
encoded) get the ImageNet recipe: a random resized crop at decode time
(`random_resized_crop`, `components/images/decode.py`) and a left-right flip. Pixel
data such as digits gets a whole-pixel shift of the zero-padded batch: exact (no
resampling blur), each image with its own offset, and shape-preserving, so batches stay
static for XLA; small training sets gain most, as the model sees a digit a pixel or two
off centre as the same digit. A shifted photo (the `fast_cnn` recipe shifts whole
photos instead of cropping them) is padded with its own mirror image, as airbench pads
CIFAR-10: a photo's scene goes on past its border, a digit's black background does not.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from tpu_pipeline.common.config import DatasetConfig, TrainerConfig

# Defaults by kind of data (`null` in the config): photos are framed anywhere and
# mirror freely; digits keep their handedness and move a little.
PHOTO_CROP_AREA = (0.25, 1.0)
PIXEL_DATA_SHIFT = 0.1


@dataclasses.dataclass(frozen=True)
class Augmentation:
    """What training does to each image.

    Attributes:
      max_shift: the largest move, in pixels, (down/up, right/left).
      flip: mirror left-right: each image with probability 1/2, or by turns
        (`flip_alternates`).
      crop_area: photos: the range of the photo's area a random crop covers; None: no crop.
      mirror_border: a shift fills the rows and columns it brings in with the image's
        mirror image (its edge row not repeated); otherwise with zeros.
      flip_alternates: whole images (no crop) flip by turns, not at random: each is
        mirrored in every other pass over the data (airbench's alternating flip, which
        shows a model both views of every image in any two passes; measured on CIFAR-10 in
        docs/benchmarks.md). The input pipeline does it (`input_pipeline.make_dataset`),
        as it knows the passes; this class's call then leaves the flips alone.
    """

    max_shift: tuple[int, int] = (0, 0)
    flip: bool = False
    crop_area: tuple[float, float] | None = None
    mirror_border: bool = False
    flip_alternates: bool = False

    @classmethod
    def from_config(cls, config: TrainerConfig, dataset: DatasetConfig) -> Augmentation:
        """The configured augmentation, unset fields following the kind of data.

        The shift is a fraction of each side in whole pixels (0.1 of 28 is 2 pixels).
        """
        photos = dataset.stores_encoded_images
        shift = config.random_shift
        if shift is None:
            shift = 0.0 if photos else PIXEL_DATA_SHIFT
        crop = config.random_crop_area
        if crop is None and photos:
            crop = PHOTO_CROP_AREA
        height, width, _ = dataset.image_shape
        flip = photos if config.random_flip is None else config.random_flip
        crop_area = None if crop is None or tuple(crop) == (1.0, 1.0) else tuple(crop)
        return cls(
            max_shift=(int(shift * height), int(shift * width)),
            flip=flip,
            crop_area=crop_area,
            mirror_border=photos,
            flip_alternates=flip and crop_area is None,
        )

    @property
    def per_batch(self) -> bool:
        """Whether `__call__` changes a batch (the crop and alternating flips happen earlier)."""
        return self.max_shift != (0, 0) or self.random_flip

    @property
    def random_flip(self) -> bool:
        """Whether each image of a batch is mirrored with probability 1/2."""
        return self.flip and not self.flip_alternates

    def __call__(self, images: tf.Tensor) -> tf.Tensor:
        """`images` [batch, height, width, channels], each shifted and flipped independently.

        The random ops take no seed of their own: the Trainer's global seed makes
        them repeatable, and distinct op seeds keep the row, column and flip draws
        independent (one shared seed would move every image along the diagonal).
        """
        batch, height, width = tf.shape(images)[0], images.shape[1], images.shape[2]
        shift_y, shift_x = self.max_shift
        if shift_y or shift_x:
            padding = [[0, 0], [shift_y, shift_y], [shift_x, shift_x], [0, 0]]
            padded = tf.pad(images, padding, "REFLECT" if self.mirror_border else "CONSTANT")
            top = tf.random.uniform([batch], 0, 2 * shift_y + 1, tf.int32)
            left = tf.random.uniform([batch], 0, 2 * shift_x + 1, tf.int32)
            rows = top[:, None] + tf.range(height)[None, :]
            columns = left[:, None] + tf.range(width)[None, :]
            images = tf.gather(padded, rows, axis=1, batch_dims=1)
            images = tf.gather(images, columns, axis=2, batch_dims=1)
        if self.random_flip:
            mirror = tf.random.uniform([batch]) < 0.5
            images = tf.where(mirror[:, None, None, None], tf.reverse(images, [2]), images)
        return images
