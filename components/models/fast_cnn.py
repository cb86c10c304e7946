"""A fast CIFAR-class network: whitened 2x2 patches, then three Conv-BN groups.

After the description of the `cifar10-airbench` recipes (Jordan, 2024, arXiv 2404.00498),
which reach 94 % on CIFAR-10 in about 0.36 PFLOP of training:

- The first layer is fixed, not learned: a 2x2 convolution whose filters whiten the
  training images' 2x2 patches (the eigenvectors of their covariance over the square
  root of the eigenvalues, and the same filters negated), computed from training
  images before the first step (`initialize`); only its bias trains.
- Three groups of conv -> max-pool -> BatchNorm -> GELU -> conv -> BatchNorm -> GELU
  (64, 256, 256 channels), a global max-pool and a bias-free linear layer whose
  logits are scaled by 1/9.
- BatchNorm learns a shift only (no scale: the scale is redundant before the next
  convolution and only slows the effective rate), and its moving statistics keep 0.6
  of the old value at each step, so they follow a run of a few hundred steps
  (airbench's PyTorch momentum of 0.4 is the new batch's share). Its shift learns 64
  times faster than the convolutions (`SHIFT_RATE`), by parametrising it as 8 x a
  trained variable.
- Convolutions start as the identity on their first input channels (Dirac init)
  plus the usual random filters on the rest, which trains faster from the first step.

About 0.24 GFLOP per 32x32 image forward (`components/models/_flops.py`). The
training recipe that goes with it (SGD with Nesterov momentum, a one-cycle rate,
label smoothing, flips and 2-pixel shifts, lookahead, test-time flips) is
`tpu_pipeline.common.config.MODEL_RECIPES["fast_cnn"]`, which fills a run's unset fields
(`pipeline/wiring/recipe.py`); the network alone trains with any recipe.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
import tf_keras

GROUP_WIDTHS = (64, 256, 256)
WHITENING_SIDE = 2
LOGIT_SCALE = 1 / 9
BATCHNORM_MOMENTUM = 0.6  # Keras's convention: the weight kept of the old statistic
BATCHNORM_EPSILON = 1e-5
# The BatchNorm shift's rate relative to the other weights': 8 x 8 (a weight scaled by
# c in the graph trains c^2 times faster under SGD).
SHIFT_RATE = 64.0
# Regularises the smallest eigenvalues of the patch covariance, relative to their mean.
WHITENING_EPSILON = 5e-4
WHITENING_LAYER = "whitening"


@tf_keras.utils.register_keras_serializable(package="tpu_pipeline")
class PatchWhitening(tf_keras.layers.Layer):
    """A fixed 2x2 'valid' convolution with a trainable bias; `initialize` sets its filters.

    Filters start as zeros: a model that skipped `initialize` is visibly wrong (every
    image the same class) rather than subtly worse.
    """

    def __init__(self, side: int = WHITENING_SIDE, **kwargs):
        super().__init__(**kwargs)
        self.side = side

    def build(self, input_shape):
        channels = int(input_shape[-1])
        patch = self.side * self.side * channels
        self.kernel = self.add_weight(
            "kernel",
            shape=(self.side, self.side, channels, 2 * patch),
            initializer="zeros",
            trainable=False,
        )
        self.bias = self.add_weight("bias", shape=(2 * patch,), initializer="zeros")
        super().build(input_shape)

    def call(self, images):
        kernel = tf.cast(self.kernel, self.compute_dtype)
        outputs = tf.nn.conv2d(images, kernel, strides=1, padding="VALID")
        return tf.nn.bias_add(outputs, tf.cast(self.bias, self.compute_dtype))

    def forward_flops(self) -> int:
        """Multiply-adds x 2 for one image (`components/models/_flops.py`)."""
        _, height, width, outputs = self.output_shape
        return 2 * height * width * outputs * self.side * self.side * self.input_shape[-1]

    def get_config(self):
        return {**super().get_config(), "side": self.side}


@tf_keras.utils.register_keras_serializable(package="tpu_pipeline")
class ScaledShift(tf_keras.layers.Layer):
    """Adds a per-channel shift stored divided by `scale`, so it learns scale^2 times faster."""

    def __init__(self, scale: float, **kwargs):
        super().__init__(**kwargs)
        self.scale = scale

    def build(self, input_shape):
        self.shift = self.add_weight("shift", shape=(int(input_shape[-1]),), initializer="zeros")
        super().build(input_shape)

    def call(self, inputs):
        return inputs + tf.cast(self.shift * self.scale, self.compute_dtype)

    def get_config(self):
        return {**super().get_config(), "scale": self.scale}


@tf_keras.utils.register_keras_serializable(package="tpu_pipeline")
class DiracThenRandom(tf_keras.initializers.Initializer):
    """Filters whose first `inputs` outputs pass their input through unchanged (identity at
    the centre tap); the other outputs uniform in +-1/sqrt(fan_in), PyTorch's default."""

    def __call__(self, shape, dtype=None, **kwargs):
        height, width, inputs, outputs = shape
        limit = 1.0 / np.sqrt(height * width * inputs)
        kernel = tf.random.uniform(shape, -limit, limit, dtype=dtype or tf.float32)
        identity = min(inputs, outputs)
        dirac = np.zeros(shape, np.float32)
        dirac[height // 2, width // 2, np.arange(identity), np.arange(identity)] = 1.0
        random_part = np.ones(shape, np.float32)
        random_part[..., :identity] = 0.0
        return kernel * random_part + tf.constant(dirac, dtype=kernel.dtype)


def _conv(x, filters: int, name: str, dtype):
    return tf_keras.layers.Conv2D(
        filters,
        3,
        padding="same",
        use_bias=False,
        kernel_initializer=DiracThenRandom(),
        dtype=dtype,
        name=name,
    )(x)


def _norm_activate(x, name: str, dtype):
    layers = tf_keras.layers
    x = layers.BatchNormalization(
        momentum=BATCHNORM_MOMENTUM,
        epsilon=BATCHNORM_EPSILON,
        center=False,
        scale=False,
        dtype=dtype,
        name=f"{name}_bn",
    )(x)
    x = ScaledShift(np.sqrt(SHIFT_RATE), dtype=dtype, name=f"{name}_shift")(x)
    return layers.Activation("gelu", dtype=dtype, name=f"{name}_gelu")(x)


def _pool(x, name: str, dtype):
    # 'valid' halves 31 to 15 as the recipe does; 'same' keeps a 1-pixel map from vanishing.
    padding = "valid" if min(x.shape[1], x.shape[2]) >= 2 else "same"
    return tf_keras.layers.MaxPooling2D(padding=padding, dtype=dtype, name=name)(x)


def logits(
    inputs: tf_keras.layers.Layer,
    num_classes: int,
    dtype: tf_keras.mixed_precision.Policy,
    *,
    widths: tuple[int, int, int] = GROUP_WIDTHS,
) -> tf_keras.layers.Layer:
    """Class logits of `inputs` (float32 images), computing under the `dtype` policy."""
    layers = tf_keras.layers
    x = PatchWhitening(dtype=dtype, name=WHITENING_LAYER)(inputs)
    x = layers.Activation("gelu", dtype=dtype, name="whitening_gelu")(x)
    for group, width in enumerate(widths, start=1):
        name = f"group{group}"
        x = _conv(x, width, f"{name}_conv1", dtype)
        x = _pool(x, f"{name}_pool", dtype)
        x = _norm_activate(x, f"{name}_conv1", dtype)
        x = _conv(x, width, f"{name}_conv2", dtype)
        x = _norm_activate(x, f"{name}_conv2", dtype)
    x = layers.GlobalMaxPooling2D(dtype=dtype, name="pool")(x)
    # PyTorch's default scale (+-1/sqrt(fan_in)), which the 1/9 logit scale was tuned with.
    head_init = tf_keras.initializers.VarianceScaling(1 / 3, "fan_in", "uniform")
    x = layers.Dense(
        num_classes, use_bias=False, kernel_initializer=head_init, dtype=dtype, name="linear"
    )(x)
    return layers.Rescaling(LOGIT_SCALE, dtype=dtype, name="logits")(x)


def whitening_filters(
    images: np.ndarray, side: int = WHITENING_SIDE
) -> tuple[np.ndarray, np.ndarray]:
    """Filters and bias that whiten the `side` x `side` patches of `images` [n, h, w, c].

    The patches are centred, so the bias makes each output zero on average; each
    whitening filter comes twice, as itself and negated, so the GELU after it keeps
    both signs of every component.

    Returns:
      kernel [side, side, c, 2 * side * side * c] and bias [2 * side * side * c].
    """
    images = np.asarray(images, np.float64)
    _, height, width, channels = images.shape
    patches = np.stack(
        [
            images[:, row : height - side + 1 + row, column : width - side + 1 + column, :]
            for row in range(side)
            for column in range(side)
        ],
        axis=3,
    )  # [n, h', w', side*side, c]: row-major patch positions, then channels
    flat = patches.reshape(-1, side * side * channels)
    mean = flat.mean(axis=0)
    covariance = np.cov(flat - mean, rowvar=False).reshape(flat.shape[1], flat.shape[1])
    eigenvalues, eigenvectors = np.linalg.eigh(covariance)
    epsilon = WHITENING_EPSILON * max(float(eigenvalues.mean()), 1e-12)
    filters = eigenvectors / np.sqrt(np.clip(eigenvalues, 0.0, None) + epsilon)  # columns
    filters = np.concatenate([filters, -filters], axis=1)
    kernel = filters.reshape(side, side, channels, -1)
    return kernel.astype(np.float32), (-mean @ filters).astype(np.float32)


def initialize(model: tf_keras.Model, images: np.ndarray) -> None:
    """Sets the whitening layer of `model` (built by `logits`) from training `images`."""
    layer = model.get_layer(WHITENING_LAYER)
    kernel, bias = whitening_filters(images, layer.side)
    layer.kernel.assign(kernel)
    layer.bias.assign(bias)
