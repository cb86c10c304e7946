"""Pipeline wiring, configuration and runners for tpu-pipeline."""

import os

# TFT and TFMA are built for Keras 2: TensorFlow must see this before it is imported.
os.environ["TF_USE_LEGACY_KERAS"] = "1"
