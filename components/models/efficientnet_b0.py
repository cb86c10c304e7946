"""EfficientNet-B0 (Tan & Le, 2019) from tf_keras.applications, behind a new head.

4.0 M parameters in the backbone; ImageNet top-1 77.1% at 224x224 (Keras's
table). The application rescales 0-255 pixels and normalises them by the ImageNet
mean and deviation itself, so our [0, 1] pixels are only multiplied by 255.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
import tf_keras

from tpu_pipeline.components.imagenet_files import IMAGENET_FILES
from tpu_pipeline.components.models._backbone import Backbone, backbone_of, logits_for

IMAGENET_STDDEV_RGB = (0.229, 0.224, 0.225)


def _square_the_stored_deviation(model: tf_keras.Model) -> None:
    """Keras's ImageNet file stores the deviations as the Normalization variance.

    tf_keras divides by their square root twice when it builds with
    `weights="imagenet"` (a multiply it inserts after the layer, tensorflow#49930).
    A model built to load any file has no such multiply, so the file's variance
    becomes the deviation squared: the same (x - mean) / deviation, as a weight the
    saved model keeps. Files we saved ourselves already hold the square. (Under a
    mixed policy the layer keeps its statistics in bfloat16, hence the tolerance.)
    """
    for layer in backbone_of(model).layers:
        if isinstance(layer, tf_keras.layers.Normalization):
            variance = layer.adapt_variance
            if np.allclose(variance.numpy(), IMAGENET_STDDEV_RGB, rtol=1e-2):
                squared = np.square(IMAGENET_STDDEV_RGB)
                variance.assign(tf.cast(squared, variance.dtype))
                layer.finalize_state()  # the layer computes from a copy of its variance


BACKBONE = Backbone(
    name="efficientnet_b0",
    application=tf_keras.applications.EfficientNetB0,
    scale=(255.0, 255.0, 255.0),
    offset=(0.0, 0.0, 0.0),
    imagenet_weights=IMAGENET_FILES["efficientnet_b0"],
    after_loading=_square_the_stored_deviation,
)

logits = logits_for(BACKBONE)
