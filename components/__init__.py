"""User code that TFX calls (preprocessing, trainer, pusher) and custom components."""

from tpu_pipeline import common  # noqa: F401 (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
