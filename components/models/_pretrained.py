"""`trainer.pretrained_weights: none | imagenet | PATH`: where a backbone's weights come from.

Weights load into the backbone only; the head always starts new. `imagenet` is
the file tf_keras itself would fetch (the application without its top), taken
from Keras's cache (~/.keras/models/) when it is there, else downloaded. A
machine that cannot download it is told, before any component runs, in one line
which file to fetch and how to point `trainer.pretrained_weights` at it. PATH is a
Keras weights file (.h5) of the same backbone, local or on any filesystem
tf.io.gfile reads (gs://): the Keras ImageNet file fetched by hand, or weights
saved from a backbone trained before.
"""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
from collections.abc import Iterator

import h5py
import tensorflow as tf
import tf_keras

from common.config import ConfigError
from common.timeouts import call_with_timeout
from components.models._backbone import Backbone, WeightsFile, backbone_of

NONE, IMAGENET = "none", "imagenet"
# Where every tf_keras application file is served from.
IMAGENET_HOST = "storage.googleapis.com"
# Reaching the host is one TCP handshake: a few seconds tell "offline" from "slow".
CONNECT_TIMEOUT_S = 3.0


def _is_remote(path: str) -> bool:
    return "://" in path


def keras_cache_file(weights: WeightsFile) -> str:
    """Where tf_keras's `get_file` keeps (or would keep) `weights`: ~/.keras/models/, else /tmp."""
    base = os.path.expanduser(os.path.join("~", ".keras"))
    if not os.access(base, os.W_OK):  # get_file falls back the same way
        base = os.path.join("/tmp", ".keras")
    return os.path.join(base, "models", weights.name)


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


def fetch_instructions(weights: WeightsFile) -> str:
    """The one line telling a user without network what to fetch and where to point."""
    return (
        f"trainer.pretrained_weights: imagenet needs {weights.name}, and {IMAGENET_HOST} cannot "
        f"be reached from here: fetch it where there is network (curl -o {weights.name} "
        f"{weights.url}) and set trainer.pretrained_weights: /path/to/{weights.name}"
    )


def require_imagenet_weights(backbone: Backbone, image_shape: tuple[int, int, int]) -> None:
    """Fails fast when the ImageNet file is neither cached nor downloadable from here.

    Raises:
      ConfigError: one line naming the file's URL and how to set PATH instead.
    """
    weights = backbone.imagenet_weights(image_shape)
    if not os.path.exists(keras_cache_file(weights)) and not can_reach(IMAGENET_HOST):
        raise ConfigError(fetch_instructions(weights))


def weights_fingerprint(source: str) -> str | None:
    """Size and modification time of a local weights file, so replacing it retrains.

    The path alone is in the Trainer's configuration, and TFX would reuse a cached
    Trainer trained on the old file. None for `none`, `imagenet` (a fixed, hashed
    file) and gs:// objects (give a new object a new name; its generation is not read
    offline).
    """
    if source in (NONE, IMAGENET) or _is_remote(source) or not os.path.isfile(source):
        return None
    found = os.stat(source)
    return f"{found.st_size}-{found.st_mtime_ns}"


def check_weights_source(source: str) -> None:
    """A local PATH must be an existing .h5 file; gs:// is read only where it trains.

    Raises:
      ConfigError: naming `trainer.pretrained_weights` and the file.
    """
    if source in (NONE, IMAGENET) or _is_remote(source):
        return
    if not os.path.isfile(source):
        raise ConfigError(
            f"trainer.pretrained_weights: no file {source!r} "
            "(allowed: none, imagenet, or the path of a backbone weights .h5 file)"
        )
    if not h5py.is_hdf5(source):
        raise ConfigError(
            f"trainer.pretrained_weights: {source} is not a Keras .h5 weights file "
            "(save one with backbone.save_weights('file.h5'))"
        )


@contextlib.contextmanager
def _local_copy(path: str) -> Iterator[str]:
    """`path` itself, or a temporary local copy of a remote file (h5 needs a local file)."""
    if not tf.io.gfile.exists(path):
        raise ConfigError(f"trainer.pretrained_weights: no file {path!r}")
    if not _is_remote(path):
        yield path
        return
    with tempfile.TemporaryDirectory() as folder:
        local = os.path.join(folder, os.path.basename(path))
        tf.io.gfile.copy(path, local)
        yield local


def _imagenet_file(backbone: Backbone, image_shape: tuple[int, int, int]) -> str:
    weights = backbone.imagenet_weights(image_shape)
    cached = keras_cache_file(weights)
    if os.path.exists(cached):
        return cached
    if not can_reach(IMAGENET_HOST):
        raise ConfigError(fetch_instructions(weights))
    return tf_keras.utils.get_file(
        weights.name, weights.url, cache_subdir="models", file_hash=weights.file_hash
    )


def load_pretrained_weights(
    model: tf_keras.Model, backbone: Backbone, source: str, image_shape: tuple[int, int, int]
) -> str | None:
    """Loads `source`'s weights into the backbone of `model`; returns the file read, or None.

    Raises:
      ConfigError: the file is missing, not an .h5 file, or another backbone's.
    """
    if source == NONE:
        return None
    path = _imagenet_file(backbone, image_shape) if source == IMAGENET else source
    check_weights_source(path)
    with _local_copy(path) as local:
        try:
            backbone_of(model).load_weights(local)
        except (ValueError, OSError) as error:
            first_line = str(error).strip().splitlines()[0]
            raise ConfigError(
                f"trainer.pretrained_weights: {path} does not hold {backbone.name}'s weights "
                f"without top: {first_line}"
            ) from error
    if backbone.after_loading is not None:
        backbone.after_loading(model)
    return path
