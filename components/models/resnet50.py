"""ResNet-50 (He et al., 2015; v1, as tf_keras.applications.ResNet50), behind a new head.

23.6 M parameters in the backbone; ImageNet top-1 74.9% at 224x224 (Keras's
table). v1 rather than ResNet50V2 (76.0%): it is the ResNet-50 of the TPU and
MLPerf reference figures people compare against. Its ImageNet weights came from
Caffe: BGR channels, 0-255, the ImageNet mean subtracted, no scaling; the input
scaling layer maps our RGB [0, 1] pixels to that.
"""

from __future__ import annotations

import tf_keras

from tpu_pipeline.components.imagenet_files import IMAGENET_FILES
from tpu_pipeline.components.models._backbone import Backbone, logits_for

# imagenet_utils.preprocess_input, mode "caffe": the ImageNet mean of B, G, R on 0-255.
IMAGENET_MEAN_BGR = (103.939, 116.779, 123.68)

BACKBONE = Backbone(
    name="resnet50",
    application=tf_keras.applications.ResNet50,
    scale=(255.0, 255.0, 255.0),
    offset=tuple(-mean for mean in IMAGENET_MEAN_BGR),
    bgr=True,
    imagenet_weights=IMAGENET_FILES["resnet50"],
)

logits = logits_for(BACKBONE)
