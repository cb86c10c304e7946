"""User code that TFX calls (preprocessing, trainer, pusher) and custom components."""

import os

# TFT and TFMA are built for Keras 2: TensorFlow must see this before it is imported.
os.environ["TF_USE_LEGACY_KERAS"] = "1"
