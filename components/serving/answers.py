"""The exported model's answers on the eval split, streamed a batch at a time.

Temperature scaling (the ServingPackager) fits on them and the attribution step (the
Explainer) searches them for mistakes; both then need only a few of the split's images
again (`eval_pixels`), so memory holds one batch and the answers, whatever the split's size.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable

import numpy as np
import tensorflow as tf

from tpu_pipeline.common.config import ConfigError, DatasetConfig
from tpu_pipeline.components.serving.export import (
    FEATURE_MAP_GRADIENTS,
    GRAD_CAM_LAYER_KEY,
    PIXELS_INPUT_KEY,
    PIXELS_SIGNATURE,
    SERVING_INPUT_KEY,
    SERVING_OUTPUT_KEY,
    SERVING_SIGNATURE,
    TRAINING_INFO_PATH,
)
from tpu_pipeline.components.serving.tflite_variants import split_batches


class PixelClassifier:
    """The SavedModel's `pixels` signature as a function: pixels [n, ...] -> probabilities.

    It holds the loaded model: a signature alone does not keep its variables alive. The
    ServingPackager loads the Trainer's export once and hands this to every step that
    asks the model (the temperature fit, the drift reference, the SavedModel's
    measurement beside its TFLite variants); the Explainer loads the served model once
    for its attributions: a load costs seconds (about 6 s for a 96x96 MobileNetV2 under a
    profiler), more than those steps' own work.
    """

    def __init__(self, export_dir: str):
        self.export_dir = export_dir
        self._loaded = tf.saved_model.load(export_dir)
        self._signature = self._loaded.signatures[PIXELS_SIGNATURE]

    def __call__(self, pixels: tf.Tensor) -> tf.Tensor:
        return self._signature(**{PIXELS_INPUT_KEY: pixels})[SERVING_OUTPUT_KEY]

    def serve_examples(self, serialized: tf.Tensor) -> np.ndarray:
        """The `serving_default` signature: serialized tf.Examples [n] -> probabilities."""
        serve = self._loaded.signatures[SERVING_SIGNATURE]
        return serve(**{SERVING_INPUT_KEY: serialized})[SERVING_OUTPUT_KEY].numpy()

    @property
    def grad_cam_layer(self) -> str | None:
        """The layer whose feature maps the model keeps for Grad-CAM, as training_info names it."""
        path = os.path.join(self.export_dir, TRAINING_INFO_PATH)
        if not tf.io.gfile.exists(path):
            return None
        with tf.io.gfile.GFile(path) as handle:
            return json.load(handle).get(GRAD_CAM_LAYER_KEY)

    def feature_map_gradients(self, pixels: tf.Tensor, target: int) -> dict[str, tf.Tensor]:
        """One layer's feature maps for `pixels` and the gradient of `target`'s probability
        with respect to them (`FEATURE_MAP_GRADIENTS`, export.py).

        Raises:
          ConfigError: the model was exported without it (before it was kept, or a model
            with no feature-map layer): explain.method asks for what the model cannot do,
            one line for the command that asked, not a traceback.
        """
        function = getattr(self._loaded, FEATURE_MAP_GRADIENTS, None)
        if function is None:
            raise ConfigError(
                f"explain.method grad_cam: the model in {self.export_dir} keeps no "
                f"{FEATURE_MAP_GRADIENTS} (exported before Grad-CAM was offered, or it has "
                "no feature-map layer); use explain.method=xrai or integrated_gradients"
            )
        return function(pixels, tf.constant(target, tf.int32))


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
