"""Training-time image augmentation: random shifts and left-right flips, batch at a time.

It runs in the tf.data input on the host, as the TPU guides' input functions do, so
the accelerator's compiled step is the same with or without it. The shift is a
whole-pixel crop of the zero-padded batch: exact (no resampling blur), each image
with its own offset, and shape-preserving, so batches stay static for XLA. Small
training sets gain most: the model sees a digit a pixel or two off centre as the
same digit, as test images often are.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from common.config import TrainerConfig


@dataclasses.dataclass(frozen=True)
class Augmentation:
    """What training does to each image.

    Attributes:
      max_shift: the largest move, in pixels, (down/up, right/left).
      flip: mirror left-right, each image with probability 1/2.
    """

    max_shift: tuple[int, int] = (0, 0)
    flip: bool = False

    @classmethod
    def from_config(cls, config: TrainerConfig, image_shape: tuple[int, int, int]) -> Augmentation:
        """The configured fraction of each side, in whole pixels (0.1 of 28 is 2 pixels)."""
        height, width, _ = image_shape
        shift = (int(config.random_shift * height), int(config.random_shift * width))
        return cls(max_shift=shift, flip=config.random_flip)

    @property
    def enabled(self) -> bool:
        return self.max_shift != (0, 0) or self.flip

    def __call__(self, images: tf.Tensor) -> tf.Tensor:
        """`images` [batch, height, width, channels], each shifted and flipped independently.

        The random ops take no seed of their own: the Trainer's global seed makes
        them repeatable, and distinct op seeds keep the row, column and flip draws
        independent (one shared seed would move every image along the diagonal).
        """
        batch, height, width = tf.shape(images)[0], images.shape[1], images.shape[2]
        shift_y, shift_x = self.max_shift
        if shift_y or shift_x:
            padded = tf.pad(images, [[0, 0], [shift_y, shift_y], [shift_x, shift_x], [0, 0]])
            top = tf.random.uniform([batch], 0, 2 * shift_y + 1, tf.int32)
            left = tf.random.uniform([batch], 0, 2 * shift_x + 1, tf.int32)
            rows = top[:, None] + tf.range(height)[None, :]
            columns = left[:, None] + tf.range(width)[None, :]
            images = tf.gather(padded, rows, axis=1, batch_dims=1)
            images = tf.gather(images, columns, axis=2, batch_dims=1)
        if self.flip:
            mirror = tf.random.uniform([batch]) < 0.5
            images = tf.where(mirror[:, None, None, None], tf.reverse(images, [2]), images)
        return images
