"""Models a user could write, referenced as `tests.components.user_models:<function>`.

Each is built the way the README asks: `function(image_shape, num_classes)`
returns an uncompiled tf_keras Model from float32 images to class logits. The
broken ones are each broken in one way a user's model can be.
"""

from __future__ import annotations

import tf_keras


def small_cnn(image_shape, num_classes):
    """A valid user model: one convolution, pooling, a dense layer of logits."""
    inputs = tf_keras.Input(image_shape)
    x = tf_keras.layers.Conv2D(16, 3, padding="same", activation="relu", name="user_conv")(inputs)
    x = tf_keras.layers.GlobalAveragePooling2D(name="user_pool")(x)
    x = tf_keras.layers.Dense(32, activation="relu", name="user_hidden")(x)
    return tf_keras.Model(inputs, tf_keras.layers.Dense(num_classes, name="user_logits")(x))


def too_few_arguments(image_shape):
    return small_cnn(image_shape, 10)


def wrong_output_shape(image_shape, num_classes):
    return small_cnn(image_shape, num_classes + 1)


def returns_probabilities(image_shape, num_classes):
    inputs = tf_keras.Input(image_shape)
    x = tf_keras.layers.Flatten()(inputs)
    return tf_keras.Model(inputs, tf_keras.layers.Dense(num_classes, activation="softmax")(x))


def returns_a_layer(image_shape, num_classes):
    return tf_keras.layers.Dense(num_classes)


def fixed_input_shape(image_shape, num_classes):
    return small_cnn((32, 32, 3), num_classes)


def huge_dense(image_shape, num_classes):
    """Fine on paper, far too big for one accelerator: a 60,000-wide dense layer."""
    inputs = tf_keras.Input(image_shape)
    x = tf_keras.layers.Flatten()(inputs)
    x = tf_keras.layers.Dense(60_000, name="huge")(x)
    return tf_keras.Model(inputs, tf_keras.layers.Dense(num_classes, name="out")(x))
