"""The two CNNs of the Cloud TPU guides, sized from the configured images.

Layers use 'same' padding so the MNIST CNN also fits small images (8x8
digits), and fixed names so TensorBoard tags and preflight messages name the
same layer in every run; the final softmax always computes in float32, whatever the precision
policy, so losses and served probabilities keep full precision.
"""

from __future__ import annotations

from collections.abc import Callable

import tf_keras

from components.preprocessing import IMAGE_KEY


def _mnist_cnn(
    inputs: tf_keras.layers.Layer, num_classes: int, dtype: tf_keras.mixed_precision.Policy
) -> tf_keras.layers.Layer:
    """Conv 32 -> pool -> Conv 64 -> pool -> Dense 64 -> classes (the MNIST TPU guide)."""
    layers = tf_keras.layers
    x = layers.Conv2D(32, 3, padding="same", activation="relu", dtype=dtype, name="conv1")(inputs)
    x = layers.MaxPooling2D(dtype=dtype, name="pool1")(x)
    x = layers.Conv2D(64, 3, padding="same", activation="relu", dtype=dtype, name="conv2")(x)
    x = layers.MaxPooling2D(dtype=dtype, name="pool2")(x)
    x = layers.Flatten(dtype=dtype, name="flatten")(x)
    x = layers.Dropout(0.4, dtype=dtype, name="dropout")(x)
    x = layers.Dense(64, activation="relu", dtype=dtype, name="hidden")(x)
    return tf_keras.layers.Dense(num_classes, name="logits", dtype=dtype)(x)


def _cifar10_cnn(
    inputs: tf_keras.layers.Layer, num_classes: int, dtype: tf_keras.mixed_precision.Policy
) -> tf_keras.layers.Layer:
    """Conv 64 -> pool -> Dense 128 -> classes (the CIFAR-10 TPU guide)."""
    layers = tf_keras.layers
    x = layers.Conv2D(64, 3, padding="same", activation="relu", dtype=dtype, name="conv1")(inputs)
    x = layers.MaxPooling2D(dtype=dtype, name="pool1")(x)
    x = layers.Flatten(dtype=dtype, name="flatten")(x)
    x = layers.Dense(128, activation="relu", dtype=dtype, name="hidden")(x)
    return tf_keras.layers.Dense(num_classes, name="logits", dtype=dtype)(x)


MODEL_BUILDERS: dict[str, Callable[..., tf_keras.layers.Layer]] = {
    "mnist_cnn": _mnist_cnn,
    "cifar10_cnn": _cifar10_cnn,
}


def build_model(
    name: str, image_shape: tuple[int, int, int], num_classes: int, precision: str = "float32"
) -> tf_keras.Model:
    """Builds the named CNN: images in, class probabilities (float32) out.

    Args:
      name: a key of MODEL_BUILDERS.
      image_shape: height, width, channels of one image.
      num_classes: size of the output layer.
      precision: Keras precision policy for the hidden layers, e.g.
        'mixed_bfloat16'. Variables stay float32 under every policy.
    """
    if name not in MODEL_BUILDERS:
        raise ValueError(f"unknown model {name!r}; allowed: {', '.join(MODEL_BUILDERS)}")
    policy = tf_keras.mixed_precision.Policy(precision)
    inputs = tf_keras.Input(shape=image_shape, name=IMAGE_KEY)
    logits = MODEL_BUILDERS[name](inputs, num_classes, policy)
    probabilities = tf_keras.layers.Activation("softmax", dtype="float32", name="probabilities")(
        logits
    )
    return tf_keras.Model(inputs, probabilities, name=name)


def compile_model(
    model: tf_keras.Model, learning_rate: float, jit_compile: bool, precision: str
) -> None:
    """Compiles with Adam and sparse cross-entropy; float16 gets dynamic loss scaling."""
    optimizer = tf_keras.optimizers.Adam(learning_rate)
    if precision == "mixed_float16":
        optimizer = tf_keras.mixed_precision.LossScaleOptimizer(optimizer)
    model.compile(
        optimizer=optimizer,
        loss=tf_keras.losses.SparseCategoricalCrossentropy(),
        metrics=[tf_keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        jit_compile=jit_compile,
    )
