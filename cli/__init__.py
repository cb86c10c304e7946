"""The `tpu-pipeline` command line: the top layer, free to use every other package."""

from tpu_pipeline import common  # noqa: F401 (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
