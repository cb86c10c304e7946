"""Temperature scaling: the fit finds the temperature that miscalibrated the answers, is
applied only when it lowers the calibration error, and the exported signatures serve it."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft
import tf_keras

from tests.components.serving.byte_examples import serialized_byte_examples
from tpu_pipeline.cli.synthetic_data import synthetic_dataset
from tpu_pipeline.components.models import build_model
from tpu_pipeline.components.serving.export import export_serving_model
from tpu_pipeline.components.serving.temperature import (
    TemperatureFit,
    calibration_error,
    fit_temperature,
    rescale,
    with_temperature,
)


def _answers(true_temperature: float, examples: int = 4000, classes: int = 10):
    """Labels drawn from calibrated probabilities q, and the answers p = rescale(q, 1/T): a
    model whose probabilities need temperature T to mean what they say."""
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 2.0, size=(examples, classes))
    calibrated = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    labels = np.array([rng.choice(classes, p=row) for row in calibrated])
    return rescale(calibrated, 1 / true_temperature), labels


@pytest.mark.parametrize("true_temperature", [0.5, 1.0, 3.0])
def test_the_fit_recovers_the_temperature_that_miscalibrated_the_answers(true_temperature):
    probabilities, labels = _answers(true_temperature)

    fit = fit_temperature(probabilities, labels)

    assert fit.temperature == pytest.approx(true_temperature, rel=0.1)
    assert fit.examples == len(labels)
    scaled = rescale(probabilities, fit.temperature)
    assert (scaled.argmax(axis=1) == probabilities.argmax(axis=1)).all()  # same classes
    assert fit.calibration_error_after == pytest.approx(calibration_error(scaled, labels))
    if true_temperature != 1.0:  # an over- or under-confident model gets better
        assert fit.applied and fit.calibration_error_after < fit.calibration_error_before / 2


def test_calibration_error_is_the_gap_bucket_by_bucket_with_1_on_its_own():
    probabilities = np.array([[0.95, 0.05], [0.95, 0.05], [0.55, 0.45], [1.0, 0.0]])
    labels = np.array([0, 1, 0, 0])
    # Bucket 0.9-1.0: 1 right of 1.9 said; 0.5-0.6: 1 of 0.55; exactly 1.0: 1 of 1.0.
    expected = (abs(1 - 1.9) + abs(1 - 0.55) + abs(1 - 1.0)) / 4
    assert calibration_error(probabilities, labels) == pytest.approx(expected)


def test_a_fit_that_would_raise_the_error_is_recorded_but_not_applied():
    fit = TemperatureFit(1.2, 50, calibration_error_before=0.01, calibration_error_after=0.02)
    assert not fit.applied
    assert fit.describe().endswith("0.0100 -> 0.0200 (not applied: it would not lower the error)")
    assert TemperatureFit.from_json(fit.as_json()) == fit
    with pytest.raises(ValueError, match="needs eval examples"):
        fit_temperature(np.zeros((0, 3)), np.zeros(0, int))


def test_the_graph_rescales_as_the_fit_does():
    probabilities, _ = _answers(2.0, examples=50)
    # A model whose input is its logits, ending in the softmax every built model ends in.
    logits = tf_keras.Input((probabilities.shape[1],))
    softmax = tf_keras.layers.Activation("softmax", dtype="float32", name="probabilities")
    model = tf_keras.Model(logits, softmax(logits))
    scaled = with_temperature(model, 2.0)
    in_graph = scaled(tf.constant(np.log(probabilities), tf.float32)).numpy()
    np.testing.assert_allclose(in_graph, rescale(probabilities, 2.0), atol=1e-5)
    assert scaled.name == model.name and len(scaled.get_weights()) == 0  # no new weights


def test_every_signature_of_an_export_with_a_temperature_serves_the_rescaled_answers(
    eight_bit_transform, tmp_path
):
    images, _, _, graph = eight_bit_transform
    dataset = synthetic_dataset("idx")
    model = build_model("mnist_cnn", dataset.image_shape, dataset.num_classes)
    transform = tft.TFTransformOutput(graph)
    plain, scaled = str(tmp_path / "plain"), str(tmp_path / "scaled")
    export_serving_model(model, transform, dataset, plain, {})
    export_serving_model(with_temperature(model, 0.25), transform, dataset, scaled, {})
    examples = serialized_byte_examples(images)
    requests = {
        "serving_default": {"examples": tf.constant(examples)},
        "pixels": {"pixels": tf.constant(images.astype(np.float32))},
    }
    for name, request in requests.items():
        before = tf.saved_model.load(plain).signatures[name](**request)["probabilities"].numpy()
        after = tf.saved_model.load(scaled).signatures[name](**request)["probabilities"].numpy()
        np.testing.assert_allclose(after, rescale(before, 0.25), atol=1e-5, err_msg=name)
        assert (after.max(axis=1) > before.max(axis=1)).all()  # sharper, as T < 1 makes it
