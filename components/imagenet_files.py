"""The ImageNet files tf_keras fetches for our backbones, known without importing TensorFlow.

`trainer.pretrained_weights: imagenet` on a machine that can neither find the file in
Keras's cache (~/.keras/models/) nor reach its host must stop in a few seconds, and a
photo dataset's default recipe must know at once whether a pretrained backbone is
available: both ask here, before TensorFlow loads (~10 s). The backbone modules
(`components/models/`) take their files from this table, so there is one list;
tests/components/models/test_backbones.py checks it against the URLs and hashes
tf_keras itself uses.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import socket
from collections.abc import Callable

from tpu_pipeline.common.config import ConfigError
from tpu_pipeline.common.timeouts import call_with_timeout

# Where every tf_keras application file is served from.
IMAGENET_HOST = "storage.googleapis.com"
# Reaching the host is one TCP handshake: a few seconds tell "offline" from "slow".
CONNECT_TIMEOUT_S = 3.0
_BASE_URL = f"https://{IMAGENET_HOST}/"


@dataclasses.dataclass(frozen=True)
class WeightsFile:
    """A weights file tf_keras downloads into its cache (~/.keras/models/).

    `file_hash` is the sha256 (64 hex digits) or md5 tf_keras checks, or None where it
    publishes none.
    """

    name: str
    url: str
    file_hash: str | None = None


# tf_keras/src/applications/efficientnet.py: BASE_WEIGHTS_PATH and WEIGHTS_HASHES["b0"][1].
EFFICIENTNET_B0 = WeightsFile(
    "efficientnetb0_notop.h5",
    _BASE_URL + "keras-applications/efficientnetb0_notop.h5",
    "50bc09e76180e00e4465e1a485ddc09d",
)
# tf_keras/src/applications/resnet.py: BASE_WEIGHTS_PATH and WEIGHTS_HASHES["resnet50"][1].
_RESNET50_NAME = "resnet50_weights_tf_dim_ordering_tf_kernels_notop.h5"
RESNET50 = WeightsFile(
    _RESNET50_NAME,
    _BASE_URL + "tensorflow/keras-applications/resnet/" + _RESNET50_NAME,
    "4d473c1dd8becc155b73f8504c6f6626",
)
# tf_keras/src/applications/mobilenet_v2.py: BASE_WEIGHT_PATH and its file names.
MOBILENET_V2_URL = _BASE_URL + "tensorflow/keras-applications/mobilenet_v2/"
# Keras has MobileNetV2 ImageNet weights trained at these square sizes; any other size
# loads the 224 ones.
MOBILENET_V2_SIZES = (96, 128, 160, 192, 224)


def mobilenet_v2_file(image_shape: tuple[int, int, int]) -> WeightsFile:
    """The file tf_keras's MobileNetV2(alpha=1.0, include_top=False) loads for these images."""
    height, width, _ = image_shape
    size = height if height == width and height in MOBILENET_V2_SIZES else 224
    name = f"mobilenet_v2_weights_tf_dim_ordering_tf_kernels_1.0_{size}_no_top.h5"
    return WeightsFile(name, MOBILENET_V2_URL + name)  # tf_keras checks no hash for these


# Each backbone's `trainer.model` name -> its ImageNet file for an image shape.
IMAGENET_FILES: dict[str, Callable[[tuple[int, int, int]], WeightsFile]] = {
    "efficientnet_b0": lambda image_shape: EFFICIENTNET_B0,
    "resnet50": lambda image_shape: RESNET50,
    "mobilenet_v2": mobilenet_v2_file,
}


def can_reach(host: str, port: int = 443, timeout_s: float = CONNECT_TIMEOUT_S) -> bool:
    """One bounded TCP connect: True if `host` answers within `timeout_s`.

    The name lookup has no timeout of its own, so the whole call is bounded too.
    """

    def connect() -> None:
        socket.create_connection((host, port), timeout=timeout_s).close()

    try:
        call_with_timeout(connect, timeout_s + 1.0, f"connect to {host}:{port}")
    except (OSError, TimeoutError):
        return False
    return True


def keras_cache_file(weights: WeightsFile) -> str:
    """Where tf_keras's `get_file` keeps (or would keep) `weights`: ~/.keras/models/, else /tmp."""
    base = os.path.expanduser(os.path.join("~", ".keras"))
    if not os.access(base, os.W_OK):  # get_file falls back the same way
        base = os.path.join("/tmp", ".keras")
    return os.path.join(base, "models", weights.name)


def _matches_hash(path: str, file_hash: str) -> bool:
    """tf_keras's `validate_file` with algorithm "auto": sha256 for 64 hex digits, else md5."""
    hasher = hashlib.sha256() if len(file_hash) == 64 else hashlib.md5()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            hasher.update(chunk)
    return hasher.hexdigest() == file_hash


def verified_cache_file(weights: WeightsFile) -> str | None:
    """The cached copy of `weights` if there is one, checked against tf_keras's hash for it.

    tf_keras's own `get_file` would silently download again over a file that fails its
    hash; offline that fails, and a file someone put there on purpose deserves a word.
    tf_keras publishes no hash for some files (MobileNetV2's): those are taken as found,
    and only their sha256 in training_info tells them apart.

    Raises:
      ConfigError: one line naming the cached file and how to replace it.
    """
    cached = keras_cache_file(weights)
    if not os.path.exists(cached):
        return None
    if weights.file_hash and not _matches_hash(cached, weights.file_hash):
        raise ConfigError(
            f"trainer.pretrained_weights: imagenet: {cached} does not match the hash tf_keras "
            f"publishes for {weights.name} ({weights.file_hash}), so it is damaged or not "
            f"Keras's file: delete it to download it again, or replace it with "
            f"curl -o {cached} {weights.url}"
        )
    return cached


def fetch_instructions(weights: WeightsFile) -> str:
    """The one line telling a user without network what to fetch and where to point."""
    return (
        f"trainer.pretrained_weights: imagenet needs {weights.name}, and {IMAGENET_HOST} cannot "
        f"be reached from here: fetch it where there is network (curl -o {weights.name} "
        f"{weights.url}) and set trainer.pretrained_weights: /path/to/{weights.name}"
    )


def is_available(weights: WeightsFile) -> bool:
    """Whether `weights` is in Keras's cache or can be downloaded from here now.

    Raises:
      ConfigError: the cached file fails its hash.
    """
    return verified_cache_file(weights) is not None or can_reach(IMAGENET_HOST)


def require_available(weights: WeightsFile) -> None:
    """Fails fast when `weights` is neither cached nor downloadable from here, or the cached
    copy fails its hash.

    Raises:
      ConfigError: one line naming the file's URL and how to set PATH instead.
    """
    if not is_available(weights):
        raise ConfigError(fetch_instructions(weights))
