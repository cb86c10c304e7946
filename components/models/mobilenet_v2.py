"""MobileNetV2 (Sandler et al., 2018; width 1.0) from tf_keras.applications, behind a new head.

2.3 M parameters in the backbone; ImageNet top-1 71.3% at 224x224 (Keras's
table). V2 rather than V3: it is the backbone of Keras's transfer-learning
guide, with plain ReLU6 convolutions every TFLite delegate runs; V3's hard-swish
and squeeze-excite blocks gain little at this size. It takes pixels in [-1, 1].
"""

from __future__ import annotations

import tf_keras

from components.models._backbone import Backbone, WeightsFile, logits_for

# tf_keras/src/applications/mobilenet_v2.py: BASE_WEIGHT_PATH and its file names.
BASE_URL = "https://storage.googleapis.com/tensorflow/keras-applications/mobilenet_v2/"
# Keras has ImageNet weights trained at these square sizes; any other size loads the 224 ones.
TRAINED_SIZES = (96, 128, 160, 192, 224)


def imagenet_weights(image_shape: tuple[int, int, int]) -> WeightsFile:
    """The file tf_keras's MobileNetV2(alpha=1.0, include_top=False) loads for these images."""
    height, width, _ = image_shape
    size = height if height == width and height in TRAINED_SIZES else 224
    name = f"mobilenet_v2_weights_tf_dim_ordering_tf_kernels_1.0_{size}_no_top.h5"
    return WeightsFile(name, BASE_URL + name)  # tf_keras checks no hash for these


BACKBONE = Backbone(
    name="mobilenet_v2",
    application=tf_keras.applications.MobileNetV2,
    scale=(2.0, 2.0, 2.0),
    offset=(-1.0, -1.0, -1.0),
    imagenet_weights=imagenet_weights,
)

logits = logits_for(BACKBONE)
