"""fast_cnn: its first layer whitens the training images' patches, computed from them."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from tpu_pipeline.components.models import (
    build_model,
    forward_flops,
    initialize_from_data,
    needs_data_to_initialize,
)
from tpu_pipeline.components.models.fast_cnn import WHITENING_LAYER, whitening_filters


def _cifar_like(count: int, side: int = 16, seed: int = 0) -> np.ndarray:
    """Smooth colour images in 0..1: neighbouring pixels and channels correlate, as in photos."""
    rng = np.random.default_rng(seed)
    coarse = rng.random((count, side // 4, side // 4, 1)) * 0.6 + rng.random((count, 1, 1, 3)) * 0.4
    images = tf.image.resize(coarse, [side, side], method="bilinear").numpy()
    return np.clip(images + rng.normal(0, 0.02, images.shape), 0, 1).astype(np.float32)


def _patches(images: np.ndarray) -> np.ndarray:
    """Every 2x2 patch, flattened in the kernel's order (rows, columns, channels)."""
    patches = tf.image.extract_patches(images, [1, 2, 2, 1], [1, 1, 1, 1], [1, 1, 1, 1], "VALID")
    return patches.numpy().reshape(-1, 4 * images.shape[-1])


def test_whitening_filters_make_the_patches_uncorrelated_with_unit_variance():
    images = _cifar_like(200)
    before = np.cov(_patches(images), rowvar=False)
    assert np.abs(before - np.diag(np.diag(before))).max() > 0.5 * np.diag(before).max()

    kernel, bias = whitening_filters(images)
    whitened = _patches(images) @ kernel.reshape(12, -1) + bias

    assert kernel.shape == (2, 2, 3, 24)
    half = whitened[:, :12]
    np.testing.assert_allclose(whitened[:, 12:], -half, atol=1e-5)  # each filter and its negative
    np.testing.assert_allclose(half.mean(axis=0), 0.0, atol=1e-3)
    after = np.cov(half, rowvar=False)
    np.testing.assert_allclose(after - np.diag(np.diag(after)), 0.0, atol=1e-3)
    # Unit variance, a little less for the faintest directions (the regularising epsilon).
    assert np.all((np.diag(after) > 0.9) & (np.diag(after) < 1.0 + 1e-3))


def test_the_trainer_initializes_the_whitening_layer_from_images_and_training_keeps_it():
    images = _cifar_like(64)
    labels = (images[:, :, :, 0].mean(axis=(1, 2)) > np.median(images[..., 0])).astype(int)
    model = build_model("fast_cnn", images.shape[1:], 2)
    layer = model.get_layer(WHITENING_LAYER)
    assert needs_data_to_initialize("fast_cnn") and not needs_data_to_initialize("cnn_bn")
    assert not np.any(layer.kernel.numpy())  # zeros until initialized: every image alike

    initialize_from_data("fast_cnn", model, images)
    kernel = layer.kernel.numpy()
    np.testing.assert_allclose(kernel, whitening_filters(images)[0], atol=1e-6)
    bias = layer.bias.numpy()
    with tf.GradientTape() as tape:
        loss = tf_keras.losses.sparse_categorical_crossentropy(labels, model(images, training=True))
    trained = model.trainable_weights
    gradients = tape.gradient(loss, trained)
    tf_keras.optimizers.SGD(0.1).apply_gradients(zip(gradients, trained, strict=True))

    np.testing.assert_array_equal(layer.kernel.numpy(), kernel)  # fixed: not trained
    assert np.any(layer.bias.numpy() != bias)
    assert [w.name for w in model.trainable_weights if WHITENING_LAYER in w.name] == [
        f"{WHITENING_LAYER}/bias:0"
    ]


@pytest.mark.parametrize("precision", ["float32", "mixed_bfloat16"])
def test_a_trained_copy_serves_the_same_answers_in_float32(precision):
    images = _cifar_like(8)
    model = build_model("fast_cnn", images.shape[1:], 10, precision)
    initialize_from_data("fast_cnn", model, images)
    copy = build_model("fast_cnn", images.shape[1:], 10, "float32")
    copy.set_weights(model.get_weights())

    tolerance = 1e-5 if precision == "float32" else 0.05
    np.testing.assert_allclose(copy(images), model(images), atol=tolerance)


def test_batchnorm_statistics_keep_six_tenths_of_the_old_value_at_each_step():
    """airbench's BatchNorm momentum, 0.4 in PyTorch's terms (the new batch's share)."""
    images = _cifar_like(32)
    model = build_model("fast_cnn", images.shape[1:], 2)
    initialize_from_data("fast_cnn", model, images)
    norm = model.get_layer("group1_conv1_bn")
    batch = tf_keras.Model(model.inputs, norm.input)(images).numpy()
    before = norm.moving_mean.numpy().copy()

    model(images, training=True)

    expected = 0.6 * before + 0.4 * batch.mean(axis=(0, 1, 2))
    np.testing.assert_allclose(norm.moving_mean.numpy(), expected, rtol=1e-4, atol=1e-5)


def test_forward_flops_count_the_whitening_layer_and_every_convolution():
    model = build_model("fast_cnn", (32, 32, 3), 10)
    whitening = 2 * 31 * 31 * 24 * (2 * 2 * 3)
    groups = [(31, 24, 64), (15, 64, 64), (15, 64, 256), (7, 256, 256), (7, 256, 256)]
    groups.append((3, 256, 256))
    convs = sum(2 * side * side * out * 9 * inputs for side, inputs, out in groups)
    assert forward_flops(model) == whitening + convs + 2 * 256 * 10


@pytest.mark.slow  # XLA compiles the whole step: ~20 s on a loaded 2-core machine
def test_the_whole_recipe_trains_in_one_xla_compiled_step_in_bfloat16_as_on_a_tpu():
    from tpu_pipeline.common.config import MODEL_RECIPES, TrainerConfig
    from tpu_pipeline.components.models import compile_model
    from tpu_pipeline.components.training.learning_rate import make_optimizer

    config = TrainerConfig(**{**MODEL_RECIPES["fast_cnn"], "random_crop_area": None})
    images = _cifar_like(16, side=8)
    model = build_model("fast_cnn", images.shape[1:], 10, "mixed_bfloat16")
    initialize_from_data("fast_cnn", model, images)
    optimizer = make_optimizer(config, 16, steps_per_epoch=2, total_steps=10)
    compile_model(model, optimizer, True, "mixed_bfloat16", label_smoothing=0.2)

    losses = [model.train_on_batch(images, np.arange(16) % 10) for _ in range(5)]

    assert np.all(np.isfinite(losses)) and int(optimizer.iterations) == 5
    average = optimizer._model_variables_moving_average[0]
    np.testing.assert_allclose(average.numpy(), model.trainable_weights[0].numpy())  # step 5
