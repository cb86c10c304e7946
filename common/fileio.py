"""TFX's file functions, with TensorFlow loaded only for a path on an object store.

`tfx.dsl.io.fileio` imports TensorFlow (~10-20 s and a screenful of start-up
lines) to register `tf.io.gfile` as its file system, even for a local folder.
Commands that only read a run folder (`serving list`, a refused `serving bless`)
must answer in about a second, so a local path goes to TFX's own local plugin
(`LocalFilesystem`, what TFX itself uses where TensorFlow is absent) and only a
path with a scheme (`gs://`, `s3://`) to `fileio`, TensorFlow and all. Same
functions, same arguments, same `NotFoundError` as `fileio`.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

from tfx.dsl.io import filesystem
from tfx.dsl.io.plugins.local import LocalFilesystem

from tpu_pipeline.common.atomic_file import is_remote

NotFoundError = filesystem.NotFoundError
PathType = str | os.PathLike


def _for(*paths: PathType) -> type[filesystem.Filesystem] | ModuleType:
    """TFX's local plugin for local paths; `fileio` (TensorFlow's gfile) if any is remote."""
    if any(is_remote(path) for path in paths):
        from tfx.dsl.io import fileio

        return fileio
    return LocalFilesystem


def open(path: PathType, mode: str = "r") -> Any:  # noqa: A001 (fileio's name)
    return _for(path).open(path, mode=mode)


def exists(path: PathType) -> bool:
    return _for(path).exists(path)


def isdir(path: PathType) -> bool:
    return _for(path).isdir(path)


def listdir(path: PathType) -> list[str]:
    return _for(path).listdir(path)


def makedirs(path: PathType) -> None:
    _for(path).makedirs(path)


def rmtree(path: PathType) -> None:
    _for(path).rmtree(path)


def copy(source: PathType, destination: PathType, overwrite: bool = False) -> None:
    _for(source, destination).copy(source, destination, overwrite=overwrite)


def rename(source: PathType, destination: PathType, overwrite: bool = False) -> None:
    _for(source, destination).rename(source, destination, overwrite=overwrite)


def remove(path: PathType) -> None:
    _for(path).remove(path)


def walk(path: PathType) -> Any:
    return _for(path).walk(path)
