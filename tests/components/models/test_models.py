"""The TPU guides' CNNs: sized from the images, float32 out under every precision policy."""

import pathlib

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from tpu_pipeline.common.config import ConfigError
from tpu_pipeline.components import models
from tpu_pipeline.components.models import BACKBONES, MODEL_BUILDERS, build_model, compile_model


# Backbones take 32x32 and up (test_backbones.py); the CNNs any size.
@pytest.mark.parametrize(
    ("name", "image_shape"),
    [
        # The ImageNet backbones take seconds each to build: `make test`, not the fast tier.
        pytest.param(name, shape, marks=pytest.mark.slow) if name in BACKBONES else (name, shape)
        for name in sorted(MODEL_BUILDERS)
        for shape in (
            [(32, 32, 1), (32, 32, 3)]
            if name in BACKBONES
            else [(8, 8, 1), (28, 28, 1), (32, 32, 3)]
        )
    ],
)
def test_models_map_images_of_any_configured_shape_to_class_probabilities(name, image_shape):
    model = build_model(name, image_shape, num_classes=7)
    images = np.random.default_rng(0).random((3, *image_shape), dtype=np.float32)
    probabilities = model.predict(images, verbose=0)
    assert probabilities.shape == (3, 7)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)


def test_mnist_cnn_has_the_guide_layers():
    model = build_model("mnist_cnn", (28, 28, 1), 10)
    convs = [layer.filters for layer in model.layers if isinstance(layer, tf_keras.layers.Conv2D)]
    dense = [layer.units for layer in model.layers if isinstance(layer, tf_keras.layers.Dense)]
    pools = [layer for layer in model.layers if isinstance(layer, tf_keras.layers.MaxPooling2D)]
    assert convs == [32, 64] and dense == [64, 10] and len(pools) == 2


def test_cifar10_cnn_has_the_guide_layers():
    model = build_model("cifar10_cnn", (32, 32, 3), 10)
    convs = [layer.filters for layer in model.layers if isinstance(layer, tf_keras.layers.Conv2D)]
    dense = [layer.units for layer in model.layers if isinstance(layer, tf_keras.layers.Dense)]
    assert convs == [64] and dense == [128, 10]


@pytest.mark.parametrize("precision", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_computes_low_but_keeps_float32_weights_and_outputs(precision):
    model = build_model("mnist_cnn", (8, 8, 1), 10, precision=precision)
    compute_dtype = precision.removeprefix("mixed_")
    assert model.get_layer("logits").compute_dtype == compute_dtype
    assert all(weight.dtype == "float32" for weight in model.weights)
    assert model.output.dtype == "float32"


def test_float16_training_gets_loss_scaling():
    model = build_model("mnist_cnn", (8, 8, 1), 10, precision="mixed_float16")
    compile_model(
        model, tf_keras.optimizers.Adam(1e-3), jit_compile=False, precision="mixed_float16"
    )
    assert isinstance(model.optimizer, tf_keras.mixed_precision.LossScaleOptimizer)


def test_xla_compiled_training_step_runs_on_cpu():
    model = build_model("cifar10_cnn", (8, 8, 3), 10)
    compile_model(model, tf_keras.optimizers.Adam(1e-3), jit_compile=True, precision="float32")
    images = np.random.default_rng(0).random((16, 8, 8, 3), dtype=np.float32)
    labels = np.arange(16) % 10
    history = model.fit(images, labels, batch_size=8, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_unknown_model_names_the_field_and_lists_the_known_ones():
    with pytest.raises(ConfigError, match=r"trainer.model: unknown model 'nope'.*cifar10_cnn"):
        build_model("nope", (8, 8, 1), 10)


def test_every_module_of_the_models_package_is_a_registered_model():
    modules = {path.stem for path in pathlib.Path(models.__file__).parent.glob("[!_]*.py")}

    assert set(MODEL_BUILDERS) == modules
    assert {"mnist_cnn", "cifar10_cnn"} <= modules


def test_label_smoothing_spreads_the_targets_so_certainty_costs_loss():
    model = build_model("mnist_cnn", (8, 8, 1), 4)
    certain = np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]], np.float32) * 0.996 + 0.001
    labels = np.array([0, 1])
    losses = {}
    for smoothing in (0.0, 0.2):
        compile_model(model, tf_keras.optimizers.SGD(), False, "float32", label_smoothing=smoothing)
        loss = model.compute_loss(y=tf.constant(labels), y_pred=tf.constant(certain))
        losses[smoothing] = float(loss)

    # Targets 0.85 for the class and 0.05 for each other: -sum(t log p) over the rows.
    expected = -(0.85 * np.log(0.997) + 3 * 0.05 * np.log(0.001))
    assert losses[0.2] == pytest.approx(expected, rel=1e-3)
    assert losses[0.0] == pytest.approx(-np.log(0.997), rel=1e-3)
