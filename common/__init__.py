"""The leaf of tpu-pipeline: typed configuration and small helpers, importing none of its
other packages, so every layer above (components, pipeline, kubeflow, cli) may use it."""

import os

# TFT and TFMA are built for Keras 2: TensorFlow must see this before it is imported.
os.environ["TF_USE_LEGACY_KERAS"] = "1"
