"""Exports the trained model as a SavedModel that serves raw `tf.Example`s.

The serving signature parses serialized examples, applies the Transform graph
and returns class probabilities, so clients send the same records the pipeline
ingested. It runs a float32 copy of the model with no XLA: training choices
(bfloat16, jit_compile, the strategy) belong to the training hardware, and a
CPU model server should not inherit them.
"""

from __future__ import annotations

import json
import os
from typing import Any

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras

from common.config import DatasetConfig
from components.models import build_model
from components.preprocessing import IMAGE_KEY

SERVING_INPUT_KEY = "examples"
SERVING_OUTPUT_KEY = "probabilities"
# TF Serving ignores assets.extra; it travels with every pushed copy of the model.
TRAINING_INFO_PATH = os.path.join("assets.extra", "training_info.json")


def serving_copy(
    trained: tf_keras.Model, model_name: str, dataset: DatasetConfig
) -> tf_keras.Model:
    """Returns a float32 copy of `trained`; weights are float32 under every policy."""
    copy = build_model(model_name, dataset.image_shape, dataset.num_classes, precision="float32")
    copy.set_weights(trained.get_weights())
    return copy


def export_serving_model(
    model: tf_keras.Model,
    transform_output: tft.TFTransformOutput,
    dataset: DatasetConfig,
    export_dir: str,
    training_info: dict[str, Any],
) -> None:
    """Saves `model` with a `serving_default` signature over serialized examples.

    Args:
      model: a float32 model taking transformed images.
      transform_output: the Transform graph to apply to parsed examples.
      dataset: names the label feature, which serving requests do not carry.
      export_dir: where the SavedModel goes (TFX's `serving_model_dir`).
      training_info: device, strategy and policy the model was trained with;
        written to `assets.extra/training_info.json`.
    """
    model.tft_layer = transform_output.transform_features_layer()
    feature_spec = transform_output.raw_feature_spec()
    feature_spec.pop(dataset.label_feature)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=SERVING_INPUT_KEY)])
    def serve_examples(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
        raw = tf.io.parse_example(serialized, feature_spec)
        images = model.tft_layer(raw)[IMAGE_KEY]
        return {SERVING_OUTPUT_KEY: model(images, training=False)}

    model.save(export_dir, save_format="tf", signatures={"serving_default": serve_examples})
    info_path = os.path.join(export_dir, TRAINING_INFO_PATH)
    tf.io.gfile.makedirs(os.path.dirname(info_path))
    with tf.io.gfile.GFile(info_path, "w") as handle:
        handle.write(json.dumps(training_info, indent=2, sort_keys=True))
