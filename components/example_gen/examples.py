"""Checks one image and its label and builds the `tf.train.Example` the pipeline reads.

Every format ends here, so every format yields the same features under the
names in `DatasetConfig` and is held to the same rules. Float sources give the
float pixel list (the configured pixel count, finite values); 8-bit pixel sources
(IDX, CIFAR-10 binary) give one bytes value of the pixel count's uint8s, a quarter
of the floats' size; image sources give one bytes value, the image as encoded
(`images.check_image`). All have the int64 label, in range, and any id feature
copied as it is. Batch predictions build examples with `labels_required=False`: a
record without a label (None) then gives an example without the label feature, as
serving requests are; a label that is there is still checked.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tpu_pipeline.common.config import DatasetConfig
from tpu_pipeline.components.contract import (
    IMAGE_FORMAT_FEATURE,
    IMAGE_HEIGHT_FEATURE,
    IMAGE_WIDTH_FEATURE,
)
from tpu_pipeline.components.example_gen.errors import DataFormatError
from tpu_pipeline.components.example_gen.images import check_image


class ExampleBuilder:
    """Turns checked (pixels or encoded image, label) pairs into `tf.train.Example`s."""

    def __init__(self, dataset: DatasetConfig, labels_required: bool = True):
        self.dataset = dataset
        self.labels_required = labels_required
        names = dataset.source.label_names
        self._label_of_name = {name: index for index, name in enumerate(names or ())}

    def names_a_class(self, name: str) -> bool:
        """Whether `name` (an image folder's name) is a class: one of label_names, or an index."""
        if self._label_of_name:
            return name in self._label_of_name
        return name.isdigit() and int(name) < self.dataset.num_classes

    def label_index(self, value: object, where: str) -> int:
        """The class index of an int label, or of a string label through `source.label_names`."""
        if isinstance(value, bytes):
            value = value.decode("utf-8", errors="replace")
        if isinstance(value, str):
            if not self._label_of_name:
                raise DataFormatError(
                    f"{where}: label {value!r} is a string; list the classes in "
                    "dataset.source.label_names to map names to class indices"
                )
            if value not in self._label_of_name:
                raise DataFormatError(
                    f"{where}: label {value!r} is not in dataset.source.label_names"
                )
            return self._label_of_name[value]
        label = int(value)
        if not 0 <= label < self.dataset.num_classes:
            raise DataFormatError(
                f"{where}: label {label} is outside the class range "
                f"[0, {self.dataset.num_classes - 1}] (dataset.num_classes)"
            )
        return label

    def label_of(self, example: tf.train.Example) -> int | None:
        """The class index of an example this builder built, or None where it has no label."""
        values = example.features.feature[self.dataset.label_feature].int64_list.value
        return int(values[0]) if values else None

    def build(
        self,
        pixels: np.ndarray,
        label: object,
        where: str,
        extra: dict[str, tf.train.Feature] | None = None,
    ) -> tf.train.Example:
        """Checks pixels and label and returns the example (`extra` features copied as they are).

        Raises:
          DataFormatError: wrong pixel count, a NaN or infinite pixel, pixels of a
            `stores_8bit_pixels` format that are not uint8, or a bad label.
        """
        pixels = np.asarray(pixels)
        if pixels.size != self.dataset.pixel_count:
            shape = "x".join(str(dim) for dim in self.dataset.image_shape)
            raise DataFormatError(
                f"{where}: {pixels.size} pixel values, expected {self.dataset.pixel_count} "
                f"(image_shape {shape})"
            )
        if self.dataset.stores_8bit_pixels:
            return self._example(self._8bit_feature(pixels, where), label, where, extra)
        flat = pixels.astype(np.float32).reshape(-1)
        bad = np.flatnonzero(~np.isfinite(flat))
        if bad.size:
            raise DataFormatError(
                f"{where}: pixel {bad[0]} is {flat[bad[0]]} ({bad.size} non-finite values)"
            )
        pixels_feature = tf.train.Feature(float_list=tf.train.FloatList(value=flat))
        return self._example(pixels_feature, label, where, extra)

    def _8bit_feature(self, pixels: np.ndarray, where: str) -> tf.train.Feature:
        """The pixels as one bytes value, row-major and channels last like the float list."""
        if pixels.dtype != np.uint8:
            raise DataFormatError(
                f"{where}: pixels are {pixels.dtype}, but format {self.dataset.format} stores "
                "whole 0-255 values as bytes; expected unsigned bytes (uint8)"
            )
        raw = np.ascontiguousarray(pixels).tobytes()
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[raw]))

    def build_image(
        self,
        encoded: bytes,
        label: object,
        where: str,
        extra: dict[str, tf.train.Feature] | None = None,
    ) -> tf.train.Example:
        """Checks one encoded image and its label; the example keeps the image's bytes.

        Raises:
          DataFormatError: the image does not decode or breaks a rule of
            `images.check_image`, or a bad label.
        """
        image = check_image(encoded, self.dataset, where)
        pixels_feature = tf.train.Feature(bytes_list=tf.train.BytesList(value=[image.data]))
        # What StatisticsGen describes and the schema bounds: sizes and formats of the photos.
        described = {
            IMAGE_HEIGHT_FEATURE: tf.train.Feature(
                int64_list=tf.train.Int64List(value=[image.height])
            ),
            IMAGE_WIDTH_FEATURE: tf.train.Feature(
                int64_list=tf.train.Int64List(value=[image.width])
            ),
            IMAGE_FORMAT_FEATURE: tf.train.Feature(
                bytes_list=tf.train.BytesList(value=[image.format.encode()])
            ),
        }
        return self._example(pixels_feature, label, where, {**described, **(extra or {})})

    def _example(self, pixels_feature, label, where, extra) -> tf.train.Example:
        feature = {self.dataset.pixel_feature: pixels_feature, **(extra or {})}
        if label is not None or self.labels_required:
            feature[self.dataset.label_feature] = tf.train.Feature(
                int64_list=tf.train.Int64List(value=[self.label_index(label, where)])
            )
        return tf.train.Example(features=tf.train.Features(feature=feature))
