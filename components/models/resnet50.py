"""ResNet-50 (He et al., 2015; v1, as tf_keras.applications.ResNet50), behind a new head.

23.6 M parameters in the backbone; ImageNet top-1 74.9% at 224x224 (Keras's
table). v1 rather than ResNet50V2 (76.0%): it is the ResNet-50 of the TPU and
MLPerf reference figures people compare against. Its ImageNet weights came from
Caffe: BGR channels, 0-255, the ImageNet mean subtracted, no scaling; the input
scaling layer maps our RGB [0, 1] pixels to that.
"""

from __future__ import annotations

import tf_keras
from tf_keras.src.applications import resnet as keras_resnet

from components.models._backbone import Backbone, WeightsFile, logits_for

# The file and hash tf_keras's ResNet50(include_top=False, weights="imagenet") fetches.
_NAME = "resnet50_weights_tf_dim_ordering_tf_kernels_notop.h5"
WEIGHTS = WeightsFile(
    _NAME, keras_resnet.BASE_WEIGHTS_PATH + _NAME, keras_resnet.WEIGHTS_HASHES["resnet50"][1]
)
# imagenet_utils.preprocess_input, mode "caffe": the ImageNet mean of B, G, R on 0-255.
IMAGENET_MEAN_BGR = (103.939, 116.779, 123.68)

BACKBONE = Backbone(
    name="resnet50",
    application=tf_keras.applications.ResNet50,
    scale=(255.0, 255.0, 255.0),
    offset=tuple(-mean for mean in IMAGENET_MEAN_BGR),
    bgr=True,
    imagenet_weights=lambda image_shape: WEIGHTS,
)

logits = logits_for(BACKBONE)
