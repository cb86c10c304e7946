"""The TPU Trainer image's base, TensorFlow/libtpu pair and runtime variables, in one place.

`kubeflow/tpu.Dockerfile` cannot import Python, so it repeats these values as
build arguments and ENV lines and `tests/kubeflow/test_dockerfiles.py` checks
that it says exactly what this module says, and that TensorFlow's version has
the locked major.minor. The custom job's TPU pool sets the PJRT variables too
(`kubeflow/custom_job.py`), so an image built before they were added still
trains on v5e.

Sources: Vertex AI "Training with TPU accelerators" (custom container: the TPU
build of TensorFlow and its libtpu in /lib; TensorFlow on v5e through PJRT;
pods start from Vertex's `tf-tpu-pod-base` image, which runs the container's
CMD/args after setting up the pod). The pair is the one Cloud TPU lists for
TensorFlow 2.16.1.
"""

from __future__ import annotations

TPU_POD_BASE_IMAGE = "us-docker.pkg.dev/vertex-ai/training/tf-tpu-pod-base-cp310:latest"
TENSORFLOW_VERSION = "2.16.1"
LIBTPU_VERSION = "1.10.1"
LIBTPU_PATH = "/lib/libtpu.so"
# TensorFlow reaches TPU v5e only through the PJRT C API plug-in, which these select.
PJRT_ENV = {
    "NEXT_PLUGGABLE_DEVICE_USE_C_API": "true",
    "TF_PLUGGABLE_DEVICE_LIBRARY_PATH": LIBTPU_PATH,
}
