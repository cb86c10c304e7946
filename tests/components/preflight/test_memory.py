"""The memory estimate counts what the backward pass keeps, inside nested backbones too."""

from __future__ import annotations

import tf_keras

from tpu_pipeline.common.config import TrainerConfig
from tpu_pipeline.components.models import build_model, compile_model
from tpu_pipeline.components.preflight.memory import GIB, estimate_memory
from tpu_pipeline.components.training.learning_rate import make_optimizer

BATCH = 16


def _compiled(model: tf_keras.Model, precision: str = "float32") -> tf_keras.Model:
    compile_model(model, make_optimizer(TrainerConfig(), 64, 1, 10), True, precision)
    model.optimizer.build(model.trainable_variables)
    return model


def _conv_block(activation: tf_keras.layers.Layer) -> tf_keras.Model:
    inputs = tf_keras.Input((8, 8, 3))
    x = tf_keras.layers.Conv2D(4, 3, padding="same", name="conv")(inputs)
    x = tf_keras.layers.BatchNormalization(name="bn")(x)
    x = activation(x)
    x = tf_keras.layers.Flatten()(x)
    return _compiled(tf_keras.Model(inputs, tf_keras.layers.Dense(2, name="dense")(x)))


def test_batchnorm_and_relu_outputs_are_recomputed_and_a_smooth_activation_kept_twice():
    relu = estimate_memory(_conv_block(tf_keras.layers.ReLU()), BATCH)
    swish = estimate_memory(_conv_block(tf_keras.layers.Activation("swish")), BATCH)

    image, conv_output, logits = 8 * 8 * 3, 8 * 8 * 4, 2
    # Kept: the input, the conv output, the logits; plus the gradients at the widest layer.
    assert relu.activations == BATCH * 4 * (image + conv_output + logits + 2 * conv_output)
    assert swish.activations - relu.activations == BATCH * 4 * 2 * conv_output


def test_a_backbones_layers_are_counted_inside_its_nested_model():
    model = _compiled(build_model("mobilenet_v2", (64, 64, 3), 10))

    estimate = estimate_memory(model, BATCH)

    assert "block_1_expand" in estimate.by_layer  # a layer of the nested backbone
    assert estimate.parameters == sum(w.shape.num_elements() * 4 for w in model.weights)
    outputs_once = sum(
        BATCH * 4 * layer.output.shape[1:].num_elements()
        for layer in model.get_layer("backbone").layers
    )
    assert 0.2 * outputs_once < estimate.activations < outputs_once


def test_resnet50_at_224_and_batch_128_in_bfloat16_fits_where_tpu_v2_cores_train_it():
    # Google's Cloud TPU ResNet-50 reference trains batch 1024 on 8 cores (128 each) in
    # bfloat16 at 224x224, on TPU v2 cores too: 8 GiB of HBM each.
    model = _compiled(build_model("resnet50", (224, 224, 3), 1000, "mixed_bfloat16"))

    estimate = estimate_memory(model, 128)

    weights_and_slots = estimate.parameters + estimate.gradients + estimate.optimizer_slots
    assert estimate.activations > 10 * weights_and_slots
    assert 3 * GIB < estimate.total < 8 * GIB
