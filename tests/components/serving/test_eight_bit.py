"""The SavedModel of 8-bit pixel data: stored examples and float pixels serve alike, TFLite too."""

import numpy as np
import tensorflow as tf
import tensorflow_transform as tft

from tests.components.serving.byte_examples import serialized_byte_examples
from tpu_pipeline.cli.synthetic_data import synthetic_dataset
from tpu_pipeline.components.models import build_model
from tpu_pipeline.components.serving.export import export_serving_model
from tpu_pipeline.components.serving.tflite_variants import array_batches, convert, pixels_converter


def test_8bit_pixels_signature_matches_the_stored_examples_and_converts_to_every_variant(
    eight_bit_transform, tmp_path
):
    images, _, _, graph = eight_bit_transform
    dataset = synthetic_dataset("idx")
    export_dir = str(tmp_path / "model")
    model = build_model("mnist_cnn", dataset.image_shape, dataset.num_classes)
    export_serving_model(model, tft.TFTransformOutput(graph), dataset, export_dir, {})
    signatures = tf.saved_model.load(export_dir).signatures
    examples = serialized_byte_examples(images)
    pixels = images.astype(np.float32)

    stored = signatures["serving_default"](examples=tf.constant(examples))["probabilities"]
    as_floats = signatures["pixels"](pixels=tf.constant(pixels))["probabilities"]

    np.testing.assert_array_equal(as_floats.numpy(), stored.numpy())
    converter = pixels_converter(export_dir)
    for variant in ("float32", "float16", "dynamic_int8", "int8"):
        runner = tf.lite.Interpreter(
            model_content=convert(converter, variant, array_batches(pixels[:8], np.zeros(8)))
        ).get_signature_runner("pixels")
        details = runner.get_input_details()["pixels"]
        image = pixels[:1]
        if details["dtype"] == np.int8:
            scale, zero_point = details["quantization"]
            image = np.clip(np.round(image / scale + zero_point), -128, 127).astype(np.int8)
        scores = runner(pixels=image)["probabilities"]
        assert scores.shape == (1, dataset.num_classes), variant
        if variant == "float32":
            np.testing.assert_allclose(scores, stored.numpy()[:1], atol=1e-5)


def test_8bit_pixels_signature_has_the_gradient_of_the_graphs_scaling(
    eight_bit_transform, tmp_path
):
    """Attributions differentiate the served `pixels` signature: through the lookup table its
    gradient is the model's gradient times the table's slope (min-max scaling: one slope)."""
    images, _, _, graph = eight_bit_transform
    dataset = synthetic_dataset("idx")
    export_dir = str(tmp_path / "model")
    model = build_model("mnist_cnn", dataset.image_shape, dataset.num_classes)
    export_serving_model(model, tft.TFTransformOutput(graph), dataset, export_dir, {})
    loaded = tf.saved_model.load(export_dir)  # kept: a signature does not hold its variables
    served = loaded.signatures["pixels"]
    pixels = tf.constant(images[:4].astype(np.float32))
    low, high = float(images.min()), float(images.max())

    with tf.GradientTape() as tape:
        tape.watch(pixels)
        answer = served(pixels=pixels)["probabilities"][:, 3]
    through_table = tape.gradient(answer, pixels)
    scaled = (pixels - low) / (high - low)
    with tf.GradientTape() as tape:
        tape.watch(scaled)
        expected_answer = model(scaled, training=False)[:, 3]
    of_the_model = tape.gradient(expected_answer, scaled)

    np.testing.assert_allclose(expected_answer.numpy(), answer.numpy(), rtol=1e-5)
    assert np.abs(of_the_model.numpy()).max() > 0
    np.testing.assert_allclose(
        through_table.numpy(), of_the_model.numpy() / (high - low), rtol=1e-3, atol=1e-9
    )
