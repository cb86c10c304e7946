"""FLOP counting for the compute-efficiency benchmark, checked against hand counts."""

from __future__ import annotations

import tf_keras

from benchmarks.flops import forward_flops, training_flops
from tpu_pipeline.components.models import build_model


def test_dense_layer_counts_one_multiply_add_per_weight():
    inputs = tf_keras.Input(shape=(4, 5))
    model = tf_keras.Model(inputs, tf_keras.layers.Dense(3)(tf_keras.layers.Flatten()(inputs)))

    assert forward_flops(model) == 2 * 20 * 3


def test_conv_layer_counts_every_output_position():
    inputs = tf_keras.Input(shape=(6, 6, 2))
    model = tf_keras.Model(inputs, tf_keras.layers.Conv2D(4, 3, padding="valid")(inputs))

    assert forward_flops(model) == 2 * (4 * 4 * 4) * (3 * 3 * 2)


def test_cifar_cnn_training_costs_three_forward_passes_of_its_conv_and_dense_layers():
    model = build_model("cifar10_cnn", (32, 32, 3), 10)
    conv = 2 * 32 * 32 * 64 * 3 * 3 * 3
    dense = 2 * (16 * 16 * 64) * 128 + 2 * 128 * 10

    assert forward_flops(model) == conv + dense
    assert training_flops(model) == 3 * (conv + dense)
