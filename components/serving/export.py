"""Exports the trained model as a SavedModel with a signature per kind of client.

- `serving_default` takes serialized `tf.Example`s (`examples`): clients send
  the same records the pipeline ingested.
- `images` takes encoded PNG/JPEG bytes (`images`), decoded and resized in the
  graph by the ops every other consumer uses (`components/images/decode.py`).
- `pixels` takes float pixels [batch, height, width, channels]: as ExampleGen
  stores pixel data, or a photo decoded and resized (0..255); the TFLite and
  TF.js conversions start from it (neither can parse examples or decode images).

Each applies the Transform graph and returns class probabilities; with test-time
flips (`trainer.test_time_flip`) the mean of the model's answers for each image and
its mirror image, in every signature, so the model the Evaluator measures and
every served copy (TFLite and TF.js start from `pixels`) answer alike. It runs a
float32 copy of the model with no XLA: training choices (bfloat16,
jit_compile, the strategy) belong to the training hardware, and a CPU model
server should not inherit them.

Beside the signatures, not served (TF Serving loads signatures only), the model keeps
`pixels_feature_map_gradients(pixels, target)`: the activations of one layer's feature
maps and the gradient of the target class's probability with respect to them, through
the same preprocessing and weights as `pixels`. Grad-CAM needs both, and no signature
can give the second (`components/explain/maps.py`).

ExampleGen stores IDX and CIFAR-10 pixels as bytes (`stores_8bit_pixels`), so their
Transform graph takes bytes, which TFLite and TF.js cannot build from floats. But 8-bit
pixels have 256 values: the graph's output for each one, read once at export, is a table
the `pixels` signature looks its input up in (`scaled_8bit_values`, `scale_8bit_pixels`).
The floats are the graph's own (the Beam pass's min-max scaling, not a copy of it), in ops
TFLite and TF.js run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_transform as tft
import tf_keras

from tpu_pipeline.common.config import DatasetConfig
from tpu_pipeline.components.contract import IMAGE_KEY
from tpu_pipeline.components.images.decode import decode_encoded_images, unit_range

SERVING_SIGNATURE = "serving_default"
SERVING_INPUT_KEY = "examples"
SERVING_OUTPUT_KEY = "probabilities"
IMAGES_SIGNATURE = IMAGES_INPUT_KEY = "images"
PIXELS_SIGNATURE = PIXELS_INPUT_KEY = "pixels"
FEATURE_MAP_GRADIENTS = "pixels_feature_map_gradients"
FEATURE_MAPS_KEY, GRADIENTS_KEY = "feature_maps", "gradients"
GRAD_CAM_LAYER_KEY = "grad_cam_layer"  # in training_info.json: the layer it reads
# In training_info.json: the dataset fields the model answers in (classes, shape, features),
# so `predict --data-dir` on a folder alone knows them from the model itself.
SERVED_DATASET_KEY = "dataset"
_SERVED_DATASET_FIELDS = {
    "name", "format", "image_shape", "pixel_feature", "label_feature", "num_classes", "source"
}  # fmt: skip
# TF Serving ignores assets.extra; it travels with every pushed copy of the model.
TRAINING_INFO_PATH = os.path.join("assets.extra", "training_info.json")
EIGHT_BIT_VALUES = 256


def served_fields(dataset: DatasetConfig) -> dict[str, Any]:
    """The dataset fields a model answers in: its classes, image shape and features."""
    return dataset.model_dump(mode="json", include=_SERVED_DATASET_FIELDS)


def feature_map_layer(model: tf_keras.Model, name: str | None) -> tf_keras.layers.Layer | None:
    """The layer Grad-CAM reads: `name`, else the last whose output is a feature map
    [batch, height, width, channels] (a backbone nested as one layer counts as its last);
    None for a model that has none or no graph to split (a subclassed model).

    Raises:
      ValueError: `name` is not a feature-map layer of the model's own graph.
    """
    if not getattr(model, "inputs", None):
        return None
    with_maps = [
        layer
        for layer in model.layers  # a functional model lists its input, a Sequential one not
        if not isinstance(layer, tf_keras.layers.InputLayer) and _outputs_feature_map(layer)
    ]
    if name is None:
        return with_maps[-1] if with_maps else None
    for layer in with_maps:
        if layer.name == name:
            return layer
    raise ValueError(
        f"explain.grad_cam_layer {name!r} is not a feature-map layer of the model; its "
        f"feature-map layers: {', '.join(layer.name for layer in with_maps) or 'none'}"
    )


def _outputs_feature_map(layer: tf_keras.layers.Layer) -> bool:
    try:
        output = layer.output  # a list for a layer with several outputs: not a feature map
    except AttributeError:  # not in the model's graph (the Transform layer it carries)
        return False
    return hasattr(output, "shape") and output.shape.rank == 4


def export_serving_model(
    model: tf_keras.Model,
    transform_output: tft.TFTransformOutput,
    dataset: DatasetConfig,
    export_dir: str,
    training_info: dict[str, Any],
    grad_cam_layer: str | None = None,
    test_time_flip: bool = False,
) -> None:
    """Saves `model` with its `serving_default`, `images` and `pixels` signatures.

    Args:
      model: a float32 model taking transformed images (a temperature-scaled one too,
        `components/serving/temperature.py`: every signature serves what it answers).
      transform_output: the Transform graph to apply to parsed examples.
      dataset: names the label feature, which serving requests do not carry.
      export_dir: where the SavedModel goes (TFX's `serving_model_dir`).
      training_info: device, strategy and policy the model was trained with;
        written to `assets.extra/training_info.json`, with the Grad-CAM layer's name and
        the dataset fields it answers in (`SERVED_DATASET_KEY`).
      grad_cam_layer: the layer whose feature maps `FEATURE_MAP_GRADIENTS` returns
        (`explain.grad_cam_layer`); None: the last with a feature map.
      test_time_flip: every signature answers the mean of the probabilities for
        each image and its left-right mirror image (Grad-CAM's maps stay one view's).

    Raises:
      ValueError: `grad_cam_layer` is not a feature-map layer of the model.
    """
    layer = feature_map_layer(model, grad_cam_layer)
    model.tft_layer = transform_output.transform_features_layer()
    # Requests carry the image only: no label, ids or the image's size statistics.
    feature_spec = {
        dataset.pixel_feature: transform_output.raw_feature_spec()[dataset.pixel_feature]
    }
    if dataset.stores_8bit_pixels:
        scaled_values = scaled_8bit_values(model.tft_layer, dataset)

    def classify(images: tf.Tensor) -> dict[str, tf.Tensor]:
        if test_time_flip:  # both views in one batch: one call of the model
            both = model(tf.concat([images, tf.reverse(images, [2])], 0), training=False)
            return {SERVING_OUTPUT_KEY: tf.reduce_mean(tf.stack(tf.split(both, 2)), axis=0)}
        return {SERVING_OUTPUT_KEY: model(images, training=False)}

    def transformed(raw: dict[str, tf.Tensor]) -> tf.Tensor:
        return model.tft_layer(raw)[IMAGE_KEY]

    def predict(raw: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        return classify(transformed(raw))

    def pixel_images(pixels: tf.Tensor) -> tf.Tensor:
        """The model's input for `pixels`, as the Transform graph would make it."""
        if dataset.stores_8bit_pixels:  # the Transform graph takes bytes: its table instead
            return scale_8bit_pixels(pixels, scaled_values)
        if dataset.stores_encoded_images:
            # The Transform graph takes encoded photos: decoded pixels skip to its last step.
            return unit_range(pixels)
        # The flat pixel list of a tf.Example; the label and other features are not needed.
        return transformed({dataset.pixel_feature: tf.reshape(pixels, [-1, dataset.pixel_count])})

    def predict_pixels(pixels: tf.Tensor) -> dict[str, tf.Tensor]:
        return classify(pixel_images(pixels))

    def predict_images(encoded: tf.Tensor) -> dict[str, tf.Tensor]:
        if dataset.stores_encoded_images:  # the Transform graph decodes photos itself
            return predict({dataset.pixel_feature: tf.reshape(encoded, [-1, 1])})
        return predict_pixels(decode_encoded_images(encoded, dataset))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=SERVING_INPUT_KEY)])
    def serve_examples(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
        return predict(tf.io.parse_example(serialized, feature_spec))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=IMAGES_INPUT_KEY)])
    def serve_images(encoded: tf.Tensor) -> dict[str, tf.Tensor]:
        return predict_images(encoded)

    pixel_spec = tf.TensorSpec([None, *dataset.image_shape], tf.float32, name=PIXELS_INPUT_KEY)

    @tf.function(input_signature=[pixel_spec])
    def serve_pixels(pixels: tf.Tensor) -> dict[str, tf.Tensor]:
        return predict_pixels(pixels)

    training_info = {**training_info, SERVED_DATASET_KEY: served_fields(dataset)}
    if layer is not None:
        training_info = {**training_info, GRAD_CAM_LAYER_KEY: layer.name}
        # The layer's output in this model's graph: a nested backbone's `output` is its own.
        maps = layer.get_output_at(len(layer.inbound_nodes) - 1)
        maps_and_answers = tf_keras.Model(model.inputs, [maps, model.output])
        target_spec = tf.TensorSpec([], tf.int32, name="target")

        @tf.function(input_signature=[pixel_spec, target_spec])
        def feature_map_gradients(pixels: tf.Tensor, target: tf.Tensor) -> dict[str, tf.Tensor]:
            with tf.GradientTape() as tape:
                maps, probabilities = maps_and_answers(pixel_images(pixels), training=False)
                score = probabilities[:, target]
            return {FEATURE_MAPS_KEY: maps, GRADIENTS_KEY: tape.gradient(score, maps)}

        setattr(model, FEATURE_MAP_GRADIENTS, feature_map_gradients)

    signatures = {SERVING_SIGNATURE: serve_examples, PIXELS_SIGNATURE: serve_pixels}
    if dataset.image_shape[2] in (1, 3):  # encoded images decode to gray or RGB only
        signatures[IMAGES_SIGNATURE] = serve_images
    # A trained model carries its optimizer: serving needs the weights only. No layer traces:
    # every reader calls the signatures or the gradients function, or restores the weights into
    # a model it builds (`models.restore_exported_weights`); tracing each layer's call for Keras to
    # revive the model took 4 of a digits run's 36 CPU seconds, and every load paid for them.
    model.save(
        export_dir,
        save_format="tf",
        signatures=signatures,
        include_optimizer=False,
        save_traces=False,
    )
    write_training_info(export_dir, training_info)


def read_training_info(export_dir: str) -> dict[str, Any]:
    """The model's `assets.extra/training_info.json`."""
    with tf.io.gfile.GFile(os.path.join(export_dir, TRAINING_INFO_PATH)) as handle:
        return json.load(handle)


def write_training_info(export_dir: str, training_info: dict[str, Any]) -> None:
    """Writes (or rewrites) the model's `assets.extra/training_info.json`."""
    info_path = os.path.join(export_dir, TRAINING_INFO_PATH)
    tf.io.gfile.makedirs(os.path.dirname(info_path))
    with tf.io.gfile.GFile(info_path, "w") as handle:
        handle.write(json.dumps(training_info, indent=2, sort_keys=True))


def scaled_8bit_values(
    transform_layer: Callable[[dict[str, tf.Tensor]], dict[str, tf.Tensor]], dataset: DatasetConfig
) -> tf.Tensor:
    """float32 [256]: what the Transform graph makes of each 8-bit value 0..255."""
    pixel_count = dataset.pixel_count
    # Every value once, in as few examples as hold them (the graph scales every pixel alike).
    rows = -(-EIGHT_BIT_VALUES // pixel_count)
    probe = np.resize(np.arange(EIGHT_BIT_VALUES, dtype=np.uint8), (rows, pixel_count))
    raw = tf.constant([[row.tobytes()] for row in probe])
    scaled = transform_layer({dataset.pixel_feature: raw})[IMAGE_KEY]
    return tf.constant(tf.reshape(scaled, [-1])[:EIGHT_BIT_VALUES].numpy())


def scale_8bit_pixels(pixels: tf.Tensor, scaled_values: tf.Tensor) -> tf.Tensor:
    """Float pixels (whole 0..255 values; others are rounded and clipped) -> the graph's floats.

    A table lookup has no gradient, which attributions (`components/explain/`) need: its
    gradient is the table's slope from each value to the next, as if the graph's scaling
    were drawn through the 256 points. The answer itself stays the lookup.
    """

    @tf.custom_gradient
    def lookup(values: tf.Tensor) -> tuple[tf.Tensor, Callable[[tf.Tensor], tf.Tensor]]:
        index = tf.cast(tf.clip_by_value(tf.round(values), 0.0, 255.0), tf.int32)
        slopes = scaled_values[1:] - scaled_values[:-1]

        def gradient(upstream: tf.Tensor) -> tf.Tensor:
            return upstream * tf.gather(slopes, tf.minimum(index, EIGHT_BIT_VALUES - 2))

        return tf.gather(scaled_values, index), gradient

    return lookup(pixels)
