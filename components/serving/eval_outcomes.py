"""Which eval examples the judged model got right, one by one, kept with the run.

TFMA keeps aggregates; to say which examples flipped from right to wrong between two
runs (`tpu-pipeline runs diff`) each example's outcome must be kept. The Evaluator writes
them beside TFMA's output (its `evaluation` folder: part of the run, cached with the
Evaluator, never pushed with the model), from the answers of the model it judged (the
served one) on the first `serving.measured_examples` eval examples in file order, the
ones its accuracy is measured on. An example is named by a digest of its stored image
and label, so two runs on the same data name it alike even when ExampleGen wrote it
again.

Reading needs no TensorFlow (`common.fileio` loads it only for an object-store path), so
`runs diff` answers in well under a second; writing imports it inside the function.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from tpu_pipeline.common import fileio

if TYPE_CHECKING:
    import tensorflow as tf

    from tpu_pipeline.common.config import DatasetConfig

EVAL_OUTCOMES_FILE = "eval_outcomes.json"
_BATCH = 32
_KEY_HEX_DIGITS = 16  # 64 bits: no two of a few million examples share one


@dataclasses.dataclass(frozen=True)
class EvalOutcomes:
    """The exported model's answer on each eval example it was measured on, in file order.

    `keys[i]` names example i (`example_key`); `labels[i]` is its class and `predicted[i]`
    the class the model gave it.
    """

    keys: list[str]
    labels: list[int]
    predicted: list[int]

    @property
    def examples(self) -> int:
        return len(self.keys)

    def right(self) -> dict[str, bool]:
        """Whether the model was right, by example key."""
        return {
            key: label == predicted
            for key, label, predicted in zip(self.keys, self.labels, self.predicted, strict=True)
        }

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), separators=(",", ":"))


def example_key(stored_image: bytes, label: int) -> str:
    """A short digest of an example's stored image (its serialized feature) and its label."""
    digest = hashlib.sha256(stored_image)
    digest.update(str(label).encode())
    return digest.hexdigest()[:_KEY_HEX_DIGITS]


def _keys_of(serialized: list[bytes], dataset: DatasetConfig) -> list[str]:
    from tensorflow.core.example import example_pb2

    keys = []
    for record in serialized:
        features = example_pb2.Example.FromString(record).features.feature
        label = features[dataset.label_feature].int64_list.value[0]
        keys.append(example_key(features[dataset.pixel_feature].SerializeToString(), label))
    return keys


def record_eval_outcomes(
    output_dir: str,
    classify: Callable[[tf.Tensor], tf.Tensor],
    eval_files: list[str],
    dataset: DatasetConfig,
    limit: int,
) -> EvalOutcomes:
    """Classifies the first `limit` eval examples with `classify` (the model's `pixels`
    signature, loaded) and writes each one's outcome into `output_dir`.

    Args:
      output_dir: the Evaluator's ModelEvaluation folder (local or on an object store).
      classify: pixels [n, ...] -> probabilities [n, classes].
      eval_files: ExampleGen's gzipped eval split.
      dataset: feature names and image shape.
      limit: how many examples, at most (`serving.measured_examples`).
    """
    import tensorflow as tf
    from absl import logging

    from tpu_pipeline.components.images.batching import images_per_call
    from tpu_pipeline.components.images.examples import parse_pixels

    started = time.monotonic()
    files = sorted(path for pattern in eval_files for path in tf.io.gfile.glob(pattern))
    records = tf.data.TFRecordDataset(files, compression_type="GZIP").take(limit)
    keys: list[str] = []
    labels: list[int] = []
    predicted: list[int] = []
    for batch in records.batch(images_per_call(dataset.image_shape, _BATCH)):
        pixels, batch_labels = parse_pixels(batch, dataset)
        keys += _keys_of(list(batch.numpy()), dataset)
        labels += [int(label) for label in batch_labels.numpy()]
        predicted += [int(answer) for answer in classify(pixels).numpy().argmax(axis=1)]
    outcomes = EvalOutcomes(keys, labels, predicted)
    path = os.path.join(output_dir, EVAL_OUTCOMES_FILE)
    with tf.io.gfile.GFile(path, "w") as handle:
        handle.write(outcomes.to_json())
    logging.info(
        "Eval outcomes: %d examples, %d right, %.1f s",
        outcomes.examples,
        sum(outcomes.right().values()),
        time.monotonic() - started,
    )
    return outcomes


def read_eval_outcomes(folder_uri: str) -> EvalOutcomes | None:
    """The outcomes recorded in a run's folder (its Evaluator's evaluation, or the Trainer's
    model_run in runs made before the Evaluator kept them), or None (none there, or a file
    that cannot be read)."""
    path = os.path.join(folder_uri, EVAL_OUTCOMES_FILE)
    try:
        if not fileio.exists(path):
            return None
        with fileio.open(path) as handle:
            return EvalOutcomes(**json.loads(handle.read()))
    except (OSError, ValueError, TypeError):
        return None
