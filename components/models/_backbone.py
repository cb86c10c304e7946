"""Keras applications as backbones: our [0, 1] images in, a new head's logits out.

Each backbone module (`efficientnet_b0`, `resnet50`, `mobilenet_v2`) describes its
application with a `Backbone`; `backbone_logits` builds every one the same way:

  images in [0, 1], 1 or 3 channels
  -> input_scaling: one fixed 1x1 convolution (not trainable, float32) that repeats a
     grey channel, puts RGB in BGR order where the weights were trained so, and scales
     and shifts each channel to the range the application was trained on
  -> backbone: the application without its top (include_top=False), built under the
     run's precision policy, one nested model
  -> global average pooling -> dropout -> Dense(num_classes) logits: the new head

The scaling is a layer of the model, so serving, TFMA and TFLite apply it too. The
architecture never depends on where the weights come from (none, ImageNet or a file),
so the serving copy, built by name, takes the trained weights as they are.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import tf_keras

from tpu_pipeline.common.config import ConfigError
from tpu_pipeline.components.imagenet_files import WeightsFile
from tpu_pipeline.components.models._precision import global_policy

# Fixed layer names: the fine-tuning phases, preflight and TensorBoard find them by these.
BACKBONE_LAYER = "backbone"
INPUT_SCALING_LAYER = "input_scaling"
# Keras's own top dropout for EfficientNetB0; the others had none, a new small head gains from it.
DEFAULT_DROPOUT = 0.2


@dataclasses.dataclass(frozen=True)
class Backbone:
    """One Keras application as a backbone.

    Attributes:
      name: the `trainer.model` value.
      application: the `tf_keras.applications` constructor.
      scale: per output channel, the application's input is `pixel * scale + offset`
        for pixels in [0, 1].
      offset: see `scale`.
      bgr: the application's weights were trained on BGR images (Caffe).
      imagenet_weights: the file tf_keras loads for `weights="imagenet"` without
        the top, for an image shape.
      after_loading: corrects weights read from a file, where the application needs it.
      min_size: the smallest height and width the application accepts.
    """

    name: str
    application: Callable[..., tf_keras.Model]
    scale: tuple[float, float, float]
    offset: tuple[float, float, float]
    imagenet_weights: Callable[[tuple[int, int, int]], WeightsFile]
    bgr: bool = False
    after_loading: Callable[[tf_keras.Model], None] | None = None
    min_size: int = 32

    def check_image_shape(self, image_shape: tuple[int, int, int]) -> None:
        """Raises ConfigError, naming the dataset field, for images the backbone cannot take."""
        height, width, channels = image_shape
        if channels not in (1, 3):
            raise ConfigError(
                f"trainer.model {self.name!r} takes images of 1 or 3 channels; "
                f"dataset.image_shape {list(image_shape)} has {channels}"
            )
        if min(height, width) < self.min_size:
            raise ConfigError(
                f"trainer.model {self.name!r} needs images of at least "
                f"{self.min_size}x{self.min_size}; dataset.image_shape is {list(image_shape)}: "
                "choose a larger dataset.image_shape or another trainer.model"
            )


def _input_scaling(backbone: Backbone, channels: int) -> tf_keras.layers.Conv2D:
    """The fixed per-pixel map from our [0, 1] pixels to the application's input range."""
    kernel = np.zeros((1, 1, channels, 3), np.float32)
    for out in range(3):
        source = 0 if channels == 1 else (2 - out if backbone.bgr else out)
        kernel[0, 0, source, out] = backbone.scale[out]
    # float32: the pixels are scaled at full precision; the backbone casts to its policy.
    return tf_keras.layers.Conv2D(
        3,
        1,
        trainable=False,
        dtype="float32",
        kernel_initializer=tf_keras.initializers.Constant(kernel.tolist()),
        bias_initializer=tf_keras.initializers.Constant(list(backbone.offset)),
        name=INPUT_SCALING_LAYER,
    )


def backbone_logits(
    backbone: Backbone,
    inputs: tf_keras.layers.Layer,
    num_classes: int,
    dtype: tf_keras.mixed_precision.Policy,
    dropout: float,
) -> tf_keras.layers.Layer:
    """Class logits of `inputs` (float32 [0, 1] images) through `backbone` and a new head.

    Raises:
      ConfigError: the images are too small or have another channel count than 1 or 3.
    """
    image_shape = tuple(inputs.shape[1:])
    backbone.check_image_shape(image_shape)
    x = _input_scaling(backbone, image_shape[-1])(inputs)
    # Applications create their layers without a dtype: the global policy decides it.
    with global_policy(dtype):
        application = backbone.application(
            include_top=False, weights=None, input_shape=(*image_shape[:2], 3)
        )
        features = tf_keras.Model(application.inputs, application.outputs, name=BACKBONE_LAYER)
    x = features(x)
    layers = tf_keras.layers
    x = layers.GlobalAveragePooling2D(dtype=dtype, name="pool")(x)
    x = layers.Dropout(dropout, dtype=dtype, name="dropout")(x)
    return layers.Dense(num_classes, dtype=dtype, name="logits")(x)


def logits_for(backbone: Backbone) -> Callable[..., tf_keras.layers.Layer]:
    """The `logits` function a backbone module registers (with the `dropout` keyword)."""

    def logits(
        inputs: tf_keras.layers.Layer,
        num_classes: int,
        dtype: tf_keras.mixed_precision.Policy,
        *,
        dropout: float = DEFAULT_DROPOUT,
    ) -> tf_keras.layers.Layer:
        """Class logits of `inputs` (float32 images in [0, 1]) under the `dtype` policy."""
        return backbone_logits(backbone, inputs, num_classes, dtype, dropout)

    return logits


def backbone_of(model: tf_keras.Model) -> tf_keras.Model:
    """The nested backbone model of a model `backbone_logits` built."""
    return model.get_layer(BACKBONE_LAYER)


def freeze_backbone(model: tf_keras.Model, frozen: bool) -> None:
    """Freezes the whole backbone, or unfreezes all of it but its BatchNorm layers.

    A frozen BatchNorm layer runs in inference mode in tf_keras, so the
    pretrained statistics stay as they are in both phases, as keras.io's
    EfficientNet fine-tuning example keeps them: a small new dataset's batch
    statistics would otherwise wipe out what the backbone learned. Recompile afterwards:
    Keras reads `trainable` when it builds the training step.
    """
    features = backbone_of(model)
    features.trainable = not frozen
    if not frozen:
        for layer in features.layers:
            if isinstance(layer, tf_keras.layers.BatchNormalization):
                layer.trainable = False
