"""MobileNetV2 (Sandler et al., 2018; width 1.0) from tf_keras.applications, behind a new head.

2.3 M parameters in the backbone; ImageNet top-1 71.3% at 224x224 (Keras's
table). V2 rather than V3: it is the backbone of Keras's transfer-learning
guide, with plain ReLU6 convolutions every TFLite delegate runs; V3's hard-swish
and squeeze-excite blocks gain little at this size. It takes pixels in [-1, 1].
"""

from __future__ import annotations

import tf_keras

from tpu_pipeline.components.imagenet_files import mobilenet_v2_file
from tpu_pipeline.components.models._backbone import Backbone, logits_for

BACKBONE = Backbone(
    name="mobilenet_v2",
    application=tf_keras.applications.MobileNetV2,
    scale=(2.0, 2.0, 2.0),
    offset=(-1.0, -1.0, -1.0),
    imagenet_weights=mobilenet_v2_file,
)

logits = logits_for(BACKBONE)
