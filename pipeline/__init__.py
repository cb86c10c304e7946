"""Pipeline wiring, the local runner, the run summary and the run report."""

import common  # noqa: F401 (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
