"""`trainer.pretrained_weights: none | imagenet | PATH`: where a backbone's weights come from.

Weights load into the backbone only; the head always starts new. `imagenet` is
the file tf_keras itself would fetch (the application without its top), taken
from Keras's cache (~/.keras/models/) when it is there, else downloaded. A cached
file must match the hash tf_keras publishes for it, as a download must: a damaged
or substituted file in the cache is refused, in one line, rather than trained on.
A machine that cannot download it is told, before any component runs, in one line
which file to fetch and how to point `trainer.pretrained_weights` at it. PATH is a
Keras weights file (.h5) of the same backbone, local or on any filesystem
tf.io.gfile reads (gs://): the Keras ImageNet file fetched by hand, or weights
saved from a backbone trained before. The sha256 of the file read goes into the
model's training_info, so a model says which bytes it started from.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator

import h5py
import tensorflow as tf
import tf_keras
from tf_keras.src.utils import data_utils

from tpu_pipeline.common.config import ConfigError
from tpu_pipeline.common.work_dirs import WorkDirs
from tpu_pipeline.components import imagenet_files
from tpu_pipeline.components.models._backbone import Backbone, backbone_of

NONE, IMAGENET = "none", "imagenet"
# Where a weights file in Cloud Storage is copied to be read (h5 needs a local file).
REMOTE_COPIES = WorkDirs("weights-copy", "local copy of a weights file")


def _is_remote(path: str) -> bool:
    return "://" in path


def require_imagenet_weights(backbone: Backbone, image_shape: tuple[int, int, int]) -> None:
    """Fails fast when the ImageNet file is neither cached nor downloadable from here, or the
    cached one fails its hash (`imagenet_files.require_available`).

    Raises:
      ConfigError: one line naming the file's URL and how to set PATH instead.
    """
    imagenet_files.require_available(backbone.imagenet_weights(image_shape))


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
    with REMOTE_COPIES.owned() as folder:
        local = os.path.join(folder, os.path.basename(path))
        tf.io.gfile.copy(path, local)
        yield local


def _imagenet_file(backbone: Backbone, image_shape: tuple[int, int, int]) -> str:
    weights = backbone.imagenet_weights(image_shape)
    cached = imagenet_files.verified_cache_file(weights)
    if cached is not None:
        return cached
    if not imagenet_files.can_reach(imagenet_files.IMAGENET_HOST):
        raise ConfigError(imagenet_files.fetch_instructions(weights))
    return tf_keras.utils.get_file(
        weights.name, weights.url, cache_subdir="models", file_hash=weights.file_hash
    )


@dataclasses.dataclass(frozen=True)
class LoadedWeights:
    """The weights file a backbone started from, as training_info records it.

    Attributes:
      path: the file read (the Keras cache's for `imagenet`).
      sha256: of its bytes as read (a gs:// file's local copy).
    """

    path: str
    sha256: str


def load_pretrained_weights(
    model: tf_keras.Model, backbone: Backbone, source: str, image_shape: tuple[int, int, int]
) -> LoadedWeights | None:
    """Loads `source`'s weights into the backbone of `model`; returns the file read, or None.

    Raises:
      ConfigError: the file is missing, not an .h5 file, or another backbone's.
    """
    if source == NONE:
        return None
    path = _imagenet_file(backbone, image_shape) if source == IMAGENET else source
    check_weights_source(path)
    with _local_copy(path) as local:
        sha256 = data_utils._hash_file(local, "sha256")  # tf_keras's chunked file hash
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
    return LoadedWeights(path, sha256)
