"""User code that TFX calls (preprocessing, trainer, pusher) and custom components."""

import common  # noqa: F401 (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
