"""The exported model's answers on the eval split, streamed a batch at a time.

Temperature scaling fits on them and the attribution step searches them for
mistakes; both then need only a few of the split's images again (`eval_pixels`),
so memory holds one batch and the answers, whatever the split's size.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import tensorflow as tf

from common.config import DatasetConfig
from components.serving.export import PIXELS_INPUT_KEY, PIXELS_SIGNATURE, SERVING_OUTPUT_KEY
from components.serving.tflite_variants import split_batches


class PixelClassifier:
    """The SavedModel's `pixels` signature as a function: pixels [n, ...] -> probabilities.

    It holds the loaded model: a signature alone does not keep its variables alive.
    """

    def __init__(self, export_dir: str):
        self._loaded = tf.saved_model.load(export_dir)
        self._signature = self._loaded.signatures[PIXELS_SIGNATURE]

    def __call__(self, pixels: tf.Tensor) -> tf.Tensor:
        return self._signature(**{PIXELS_INPUT_KEY: pixels})[SERVING_OUTPUT_KEY]


def eval_answers(
    classify: Callable[[tf.Tensor], tf.Tensor],
    eval_files: list[str],
    dataset: DatasetConfig,
    limit: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The probabilities [n, classes] and labels [n] of the first `limit` eval examples."""
    probabilities, labels = [], []
    for pixels, batch_labels in split_batches(eval_files, dataset, limit):
        probabilities.append(classify(pixels).numpy())
        labels.append(batch_labels.numpy())
    if not labels:
        return np.zeros((0, dataset.num_classes)), np.zeros(0, np.int64)
    return np.concatenate(probabilities), np.concatenate(labels)


def eval_pixels(
    eval_files: list[str], dataset: DatasetConfig, indices: Iterable[int]
) -> dict[int, np.ndarray]:
    """The pixels of the eval examples at `indices` (positions in `eval_answers`' order)."""
    wanted = set(indices)
    found: dict[int, np.ndarray] = {}
    start = 0
    limit = max(wanted) + 1 if wanted else 0
    for pixels, _ in split_batches(eval_files, dataset, limit):
        for offset in range(len(pixels)):
            if start + offset in wanted:
                found[start + offset] = pixels[offset].numpy()
        start += len(pixels)
    return found
