"""The model's drift reference: the signals of the data it was trained and checked on, kept with it.

The ServingPackager writes it beside the SavedModel it serves (`assets.extra/`, which
TF Serving ignores and every pushed copy carries), so a `predict` job compares its
input with the data of this very model, wherever the model is copied. Two tables:

- image signals (pixels, stored size and format) of the training split: the images
  the model learned from;
- prediction signals (predicted class, confidence) of the eval split, as the exported
  model answers them: unseen by the model, so its class mix and confidence are what
  new images of the same kind give (on training images it looks surer than it is).

Each holds the first `serving.measured_examples` of its shuffled split, read a batch
at a time. The values are kept, not their statistics: `predict` derives `unsure` with
its own `drift.low_confidence` and computes both sides' statistics in one Beam job.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from tpu_pipeline.common.config import DatasetConfig
from tpu_pipeline.components.drift.examples import image_signals
from tpu_pipeline.components.drift.signals import prediction_signals
from tpu_pipeline.components.images.batching import images_per_call

REFERENCE_PATH = os.path.join("assets.extra", "drift_reference.json")
# Examples read and predicted at a time, for small images; fewer for large ones
# (`images_per_call`): what making the reference holds in memory.
_BATCH = 64
# Digits enough for any comparison; keeps the file small (2,000 photos: ~0.3 MB).
_DIGITS = 6


@dataclasses.dataclass(frozen=True)
class Reference:
    """The two tables: signal name -> one value per example."""

    images: dict[str, np.ndarray]  # of training examples
    answers: dict[str, np.ndarray]  # of eval examples

    def describe(self) -> str:
        return f"{_count(self.images):,} training and {_count(self.answers):,} eval images"


def _count(table: dict[str, np.ndarray]) -> int:
    return len(next(iter(table.values()), []))


def _table(
    file_patterns: list[str],
    limit: int,
    batch: int,
    signals_of: Callable[[tf.Tensor], dict],
) -> dict[str, list]:
    """The signals of the first `limit` examples of a split, `batch` at a time, as JSON lists."""
    files = sorted(path for pattern in file_patterns for path in tf.io.gfile.glob(pattern))
    records = tf.data.TFRecordDataset(files, compression_type="GZIP").take(limit).batch(batch)
    columns: dict[str, list] = {}
    for serialized in records:
        for name, values in signals_of(serialized).items():
            kept = values.tolist() if values.dtype == object else np.round(values, _DIGITS).tolist()
            columns.setdefault(name, []).extend(kept)
    return columns


def write_drift_reference(
    export_dir: str,
    train_files: list[str],
    eval_files: list[str],
    dataset: DatasetConfig,
    limit: int,
    predict: Callable[[tf.Tensor], np.ndarray],
) -> Reference:
    """Writes the reference of the model exported to `export_dir` to its `REFERENCE_PATH`.

    `predict` is the exported model's `serving_default`: serialized examples [n] ->
    probabilities [n, classes], so the reference holds what the served model answers.
    """
    batch = images_per_call(dataset.image_shape, _BATCH)
    images = _table(
        train_files,
        limit,
        batch,
        lambda serialized: image_signals(list(serialized.numpy()), dataset),
    )
    answers = _table(
        eval_files,
        limit,
        batch,
        lambda serialized: prediction_signals(predict(serialized), dataset.class_names),
    )
    path = os.path.join(export_dir, REFERENCE_PATH)
    tf.io.gfile.makedirs(os.path.dirname(path))
    with tf.io.gfile.GFile(path, "w") as handle:
        json.dump({"train": images, "eval": answers}, handle)
    return Reference(_arrays(images), _arrays(answers))


def _arrays(columns: dict[str, list]) -> dict[str, np.ndarray]:
    return {
        name: np.array(values, dtype=object if values and isinstance(values[0], str) else float)
        for name, values in columns.items()
    }


class DamagedReference(ValueError):
    """The reference file is there but cannot be read as one."""


def read_drift_reference(model_dir: str) -> Reference | None:
    """The reference kept with the model in `model_dir`; None for a model exported before
    references were kept, or one whose splits held no example.

    Raises:
      DamagedReference: the file is not the JSON `write_drift_reference` writes.
    """
    path = os.path.join(model_dir, REFERENCE_PATH)
    if not tf.io.gfile.exists(path):
        return None
    try:
        with tf.io.gfile.GFile(path) as handle:
            kept = json.load(handle)
        reference = Reference(_arrays(kept["train"]), _arrays(kept["eval"]))
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise DamagedReference(f"{path} is damaged ({type(error).__name__}: {error})") from None
    if not _count(reference.images) or not _count(reference.answers):
        return None
    return reference
