"""The model as it is served: its signature, and predictions on real eval examples.

It calls the SavedModel's `serving_default` exactly as a client would, with
serialized `tf.Example`s, so the sample predictions in the report also prove
the exported model works end to end.
"""

from __future__ import annotations

import dataclasses
import glob
import os

import numpy as np
import tensorflow as tf
from ml_metadata.proto import metadata_store_pb2

from tpu_pipeline.common.config import DatasetConfig
from tpu_pipeline.common.tfx_api import artifact_utils, standard_artifacts
from tpu_pipeline.components.images.examples import parse_pixels
from tpu_pipeline.components.serving.export import SERVING_INPUT_KEY, SERVING_OUTPUT_KEY

EVAL_SPLIT = "eval"
# Examples the served model predicts at a time for the report's samples.
PREDICT_BATCH = 32


@dataclasses.dataclass
class Samples:
    """Eval examples with the served model's predictions; mistakes come first."""

    images: np.ndarray  # [n, height, width, channels] raw pixel values
    true_labels: np.ndarray
    predicted: np.ndarray
    confidence: np.ndarray  # probability of the predicted class
    examined: int  # examples predicted to pick these from
    mistakes: int  # wrong predictions among the examined


def _describe_spec(spec: tf.TensorSpec) -> str:
    shape = ", ".join("None" if dim is None else str(dim) for dim in spec.shape)
    return f"{spec.dtype.name} [{shape}]"


def load_signatures(model_dir: str) -> dict[str, tf.types.experimental.ConcreteFunction]:
    """The SavedModel's signatures by name, as a model server would call them."""
    return dict(tf.saved_model.load(model_dir).signatures)


def describe_signature(serve: tf.types.experimental.ConcreteFunction) -> dict[str, dict[str, str]]:
    """Inputs and outputs of a signature by name, e.g. `{"inputs": {"examples": ...}}`."""
    _, inputs = serve.structured_input_signature
    return {
        "inputs": {name: _describe_spec(spec) for name, spec in inputs.items()},
        "outputs": {name: _describe_spec(spec) for name, spec in serve.structured_outputs.items()},
    }


def eval_records(examples: metadata_store_pb2.Artifact, limit: int) -> list[bytes]:
    """The first `limit` serialized examples of ExampleGen's eval split."""
    artifact = standard_artifacts.Examples()
    artifact.set_mlmd_artifact(examples)
    split_dir = artifact_utils.get_split_uri([artifact], EVAL_SPLIT)
    files = sorted(glob.glob(os.path.join(split_dir, "*")))
    dataset = tf.data.TFRecordDataset(files, compression_type="GZIP").take(limit)
    return [record.numpy() for record in dataset]


def predict_samples(
    serve: tf.types.experimental.ConcreteFunction,
    records: list[bytes],
    dataset: DatasetConfig,
    shown: int,
) -> Samples:
    """Predicts `records` with the serving signature and keeps `shown` of them, mistakes first.

    A batch of `PREDICT_BATCH` records at a time, keeping only the images that can still be
    shown (the first `shown` mistakes and `shown` right answers): what this holds does not
    grow with `len(records)` or the image size times it.
    """
    kept: dict[bool, list[tuple[np.ndarray, int, int, float]]] = {False: [], True: []}
    mistakes = 0
    for start in range(0, len(records), PREDICT_BATCH):
        batch = tf.constant(records[start : start + PREDICT_BATCH])
        probabilities = serve(**{SERVING_INPUT_KEY: batch})[SERVING_OUTPUT_KEY].numpy()
        images, labels = (tensor.numpy() for tensor in parse_pixels(batch, dataset))
        for image, label, scores in zip(images, labels, probabilities, strict=True):
            predicted = int(scores.argmax())
            right = predicted == label
            mistakes += not right
            if len(kept[right]) < shown:
                kept[right].append((image, int(label), predicted, float(scores[predicted])))
    wrong, right = kept[False], kept[True]
    # Mistakes fill at most half the grid while there are correct predictions to show.
    chosen = (wrong[: shown // 2] + right + wrong[shown // 2 :])[:shown]
    images, true_labels, predicted, confidence = (
        np.array(part) for part in zip(*chosen, strict=True)
    )
    return Samples(
        images=images,
        true_labels=true_labels,
        predicted=predicted,
        confidence=confidence,
        examined=len(records),
        mistakes=mistakes,
    )
