"""The TPU Trainer image's pins: base image digest, TensorFlow and libtpu files and their hashes.

`kubeflow/tpu.Dockerfile` cannot import Python, so it repeats the fixed values as
build arguments and ENV lines and `tests/kubeflow/test_dockerfiles.py` checks
that it says exactly what this module says, and that TensorFlow's version is the
one in requirements.lock. The custom job's TPU pool sets the PJRT variables too
(`kubeflow/custom_job.py`), so an image built before they were added still
trains on v5e.

Every file the build downloads is checked by sha256, and the base image is pulled
by digest, so a rebuilt image holds the bytes the last one held. Two of them are
published nowhere they could be read offline: the base image's digest and
libtpu's hash. `python -m tpu_pipeline.kubeflow.tpu_image` (the build command runs it first)
resolves both on the first build that reaches the registries, records them in
`kubeflow/tpu-image.lock` (commit it), checks them again on every later build
(`kubeflow/image_lock.py`, as `go.sum`), and prints the `--build-arg` flags that
give them to the Dockerfile, whose own defaults (`UNSET`) no build accepts.

Sources: Vertex AI "Training with TPU accelerators" (custom container: the TPU
build of TensorFlow and its libtpu in /lib; TensorFlow on v5e through PJRT;
pods start from Vertex's `tf-tpu-pod-base` image, which runs the container's
CMD/args after setting up the pod); Cloud TPU "TPU software versions" (libtpu.so
1.10.1 for TensorFlow 2.16.2 and 2.16.1).
"""

from __future__ import annotations

import hashlib
import pathlib
import subprocess
import sys
import urllib.error
import urllib.request

from tpu_pipeline.common.config import REPO_ROOT
from tpu_pipeline.kubeflow.image_lock import (
    LockError,
    Pin,
    Resolved,
    UnresolvableError,
    resolve_pins,
)

# The Dockerfile's default for a pin given as a build argument: docker refuses it as a
# digest, sha256sum as a hash, so a build without the arguments stops.
UNSET = "UNSET"
LOCK_FILE = REPO_ROOT / "kubeflow" / "tpu-image.lock"
RESOLVE_TIMEOUT_S = 60

TPU_POD_BASE_IMAGE = "us-docker.pkg.dev/vertex-ai/training/tf-tpu-pod-base-cp310"
# The tag whose digest the first build records; later builds pull that digest.
TPU_POD_BASE_TAG = f"{TPU_POD_BASE_IMAGE}:latest"

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
LIBTPU_PATH = "/lib/libtpu.so"

# TensorFlow reaches TPU v5e only through the PJRT C API plug-in, which these select.
PJRT_ENV = {
    "NEXT_PLUGGABLE_DEVICE_USE_C_API": "true",
    "TF_PLUGGABLE_DEVICE_LIBRARY_PATH": LIBTPU_PATH,
}


def image_digest(reference: str) -> str:
    """The sha256 digest `reference` (a tag) names in its registry now, as docker reads it.

    Raises:
      UnresolvableError: no docker here, or the registry cannot be reached.
    """
    try:
        inspected = subprocess.run(
            ["docker", "buildx", "imagetools", "inspect", reference],
            capture_output=True,
            text=True,
            timeout=RESOLVE_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise UnresolvableError(f"docker buildx imagetools inspect: {error}") from None
    for line in inspected.stdout.splitlines():
        if line.startswith("Digest:") and "sha256:" in line:
            return line.split("sha256:", 1)[1].strip()
    said = (inspected.stderr.strip().splitlines() or ["no Digest line"])[-1]
    raise UnresolvableError(f"docker buildx imagetools inspect: {said}")


def file_sha256(url: str) -> str:
    """The sha256 of the file at `url`, downloaded now (read in 1 MiB chunks).

    Raises:
      UnresolvableError: the URL cannot be reached.
    """
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=RESOLVE_TIMEOUT_S) as response:
            while chunk := response.read(1 << 20):
                digest.update(chunk)
    except (OSError, urllib.error.URLError) as error:
        raise UnresolvableError(f"{type(error).__name__}: {error}") from None
    return digest.hexdigest()


def pins() -> list[Pin]:
    """What the build takes by digest and this module cannot know: the base image, libtpu."""
    return [
        Pin("BASE_IMAGE", TPU_POD_BASE_TAG, image_digest),
        Pin("LIBTPU_SHA256", LIBTPU_URL, file_sha256),
    ]


def build_args(resolved: Resolved) -> list[str]:
    """The `docker build` flags giving kubeflow/tpu.Dockerfile the locked digests."""
    values = {
        "BASE_IMAGE": f"{TPU_POD_BASE_IMAGE}@sha256:{resolved.digests['BASE_IMAGE']}",
        "LIBTPU_SHA256": resolved.digests["LIBTPU_SHA256"],
    }
    return [word for name, value in values.items() for word in ("--build-arg", f"{name}={value}")]


def main(lock_path: pathlib.Path = LOCK_FILE) -> int:
    """Prints the build arguments of the locked digests (recording them on first use); exit 1,
    in one line, when a source changed since it was recorded or cannot be resolved at all."""
    try:
        resolved = resolve_pins(pins(), lock_path)
    except LockError as error:
        print(f"kubeflow/tpu_image: {error}", file=sys.stderr)
        return 1
    for line in resolved.unverified:
        print(f"kubeflow/tpu_image: warning: {line}", file=sys.stderr)
    print(" ".join(build_args(resolved)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
