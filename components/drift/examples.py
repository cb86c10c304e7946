"""The drift signals of a batch of stored examples and the model's answers about them.

The reference (the ServingPackager's) and every `predict` job read them through this
one function, from the same serialized `tf.Example`s the served model takes, so
both sides decode, resize and measure images alike. Photos also give what
ExampleGen stored about each file: its height, width and format.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import tensorflow as tf

from tpu_pipeline.common.config import DatasetConfig
from tpu_pipeline.components.contract import (
    IMAGE_FORMAT_FEATURE,
    IMAGE_HEIGHT_FEATURE,
    IMAGE_WIDTH_FEATURE,
)
from tpu_pipeline.components.drift.signals import IMAGE_SIZE, pixel_signals, prediction_signals
from tpu_pipeline.components.images.examples import parse_images


def _stored_image_facts(serialized: list[bytes]) -> dict[str, np.ndarray]:
    """Each photo's stored size ("WIDTHxHEIGHT") and format, as categories.

    Sizes are compared as shares, not as numbers: a folder of photos is often all one
    size, and against a single value TFDV's divergence calls one odd photo a shift.
    """
    parsed = tf.io.parse_example(
        tf.constant(serialized),
        {
            IMAGE_HEIGHT_FEATURE: tf.io.FixedLenFeature([1], tf.int64, default_value=[0]),
            IMAGE_WIDTH_FEATURE: tf.io.FixedLenFeature([1], tf.int64, default_value=[0]),
            IMAGE_FORMAT_FEATURE: tf.io.FixedLenFeature([1], tf.string, default_value=[b""]),
        },
    )
    heights = parsed[IMAGE_HEIGHT_FEATURE].numpy()[:, 0]
    widths = parsed[IMAGE_WIDTH_FEATURE].numpy()[:, 0]
    formats = parsed[IMAGE_FORMAT_FEATURE].numpy()[:, 0]
    return {
        IMAGE_SIZE: np.array(
            [f"{w}x{h}" for w, h in zip(widths, heights, strict=True)], dtype=object
        ),
        IMAGE_FORMAT_FEATURE: np.array([value.decode() for value in formats], dtype=object),
    }


def image_signals(serialized: list[bytes], dataset: DatasetConfig) -> dict[str, np.ndarray]:
    """Per example: its pixel signals, and its stored size and format for photos."""
    signals = pixel_signals(parse_images(tf.constant(serialized), dataset).numpy())
    if dataset.stores_encoded_images:
        signals.update(_stored_image_facts(serialized))
    return signals


def example_signals(
    serialized: list[bytes], probabilities: np.ndarray, dataset: DatasetConfig
) -> dict[str, np.ndarray]:
    """Per example: its image signals and those of the model's answer about it."""
    return {
        **image_signals(serialized, dataset),
        **prediction_signals(probabilities, dataset.class_names),
    }


def record_batch(signals: dict[str, np.ndarray], missing: dict[str, int] | None = None):
    """`signals` as TFDV reads features: one value per example, each in a list column.

    `missing` puts that many examples without the signal before its values (the
    reference's prediction signals come from other images than its image signals).
    """
    missing = missing or {}
    rows = max(missing.get(name, 0) + len(values) for name, values in signals.items())
    columns = {}
    for name, values in signals.items():
        kind = pa.large_string() if values.dtype == object else pa.float64()
        before = missing.get(name, 0)
        after = rows - before - len(values)
        lists = [None] * before + [[value] for value in values.tolist()] + [None] * after
        columns[name] = pa.array(lists, type=pa.list_(kind))
    return pa.RecordBatch.from_pydict(columns)
