"""The TPU Trainer image's pins: base image digest, TensorFlow and libtpu files and their hashes.

`kubeflow/tpu.Dockerfile` cannot import Python, so it repeats these values as
build arguments and ENV lines and `tests/kubeflow/test_dockerfiles.py` checks
that it says exactly what this module says, and that TensorFlow's version is the
one in requirements.lock. The custom job's TPU pool sets the PJRT variables too
(`kubeflow/custom_job.py`), so an image built before they were added still
trains on v5e.

Every file the build downloads is checked by sha256, and the base image is pulled
by digest, so a rebuilt image holds the bytes the last one held. A pin that could
not be read where this was written is `UNSET`: `python -m tpu_pipeline.kubeflow.tpu_image` (the
README's build command runs it first) names each one and how to fill it in and
exits 1, and the Dockerfile itself refuses to build with one, so nothing unpinned
ships.

Sources: Vertex AI "Training with TPU accelerators" (custom container: the TPU
build of TensorFlow and its libtpu in /lib; TensorFlow on v5e through PJRT;
pods start from Vertex's `tf-tpu-pod-base` image, which runs the container's
CMD/args after setting up the pod); Cloud TPU "TPU software versions" (libtpu.so
1.10.1 for TensorFlow 2.16.2 and 2.16.1).
"""

from __future__ import annotations

import sys

# A value no pin can take: docker refuses it as a digest, sha256sum as a hash.
UNSET = "UNSET"

TPU_POD_BASE_IMAGE = "us-docker.pkg.dev/vertex-ai/training/tf-tpu-pod-base-cp310"
# No digest of this image was published where it could be read offline. Refresh with
# `docker buildx imagetools inspect` (or `gcloud artifacts docker images describe`) of
# TPU_POD_BASE_IMAGE + ":latest": the hex after "Digest: sha256:".
TPU_POD_BASE_DIGEST = UNSET

# The TPU build of the lock's TensorFlow, as TensorFlow publishes it on PyPI
# (tensorflow-tpu; `pip install tensorflow-tpu` is TensorFlow's own TPU install). Refresh:
# https://pypi.org/simple/tensorflow-tpu/ lists each file's sha256; take the
# cp310 manylinux2014_x86_64 wheel's.
TENSORFLOW_VERSION = "2.16.2"
TENSORFLOW_TPU_WHEEL_SHA256 = "9bc3d42686bc9f3144a4332effa434b78bc639692abd63737f3b00e099aa884d"

LIBTPU_VERSION = "1.10.1"
LIBTPU_URL = (
    f"https://storage.googleapis.com/cloud-tpu-tpuvm-artifacts/libtpu/{LIBTPU_VERSION}/libtpu.so"
)
# Cloud TPU publishes no hash for it: fetch it from a trusted network once and take its
# `sha256sum libtpu.so` (the same URL serves the same bytes to every build after).
LIBTPU_SHA256 = UNSET
LIBTPU_PATH = "/lib/libtpu.so"

# TensorFlow reaches TPU v5e only through the PJRT C API plug-in, which these select.
PJRT_ENV = {
    "NEXT_PLUGGABLE_DEVICE_USE_C_API": "true",
    "TF_PLUGGABLE_DEVICE_LIBRARY_PATH": LIBTPU_PATH,
}


def base_image() -> str:
    """The base image reference the Dockerfile pulls: by digest, never by a moving tag."""
    return f"{TPU_POD_BASE_IMAGE}@sha256:{TPU_POD_BASE_DIGEST}"


def unset_pins() -> list[str]:
    """One line per pin still UNSET: its name in this module and how to fill it in."""
    pins = [
        (
            "TPU_POD_BASE_DIGEST",
            TPU_POD_BASE_DIGEST,
            f"docker buildx imagetools inspect {TPU_POD_BASE_IMAGE}:latest (its Digest line)",
        ),
        (
            "TENSORFLOW_TPU_WHEEL_SHA256",
            TENSORFLOW_TPU_WHEEL_SHA256,
            "the sha256 https://pypi.org/simple/tensorflow-tpu/ lists for "
            f"tensorflow_tpu-{TENSORFLOW_VERSION}-cp310-cp310-manylinux_2_17_x86_64",
        ),
        ("LIBTPU_SHA256", LIBTPU_SHA256, f"sha256sum of {LIBTPU_URL}, fetched where you trust"),
    ]
    return [
        f"kubeflow/tpu_image.py: {name} is not set: {how}; "
        "then give kubeflow/tpu.Dockerfile the same value"
        for name, value, how in pins
        if value == UNSET
    ]


def main() -> int:
    """Exit 1, naming each pin to fill in, while any is UNSET; 0 when the image can be built."""
    missing = unset_pins()
    for line in missing:
        print(line, file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
