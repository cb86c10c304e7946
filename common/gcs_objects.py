"""Cloud Storage objects changed only under a generation precondition.

Every Cloud Storage object has a generation, a number that changes with each write.
A write may name the generation it expects: 0 for "only if absent", or the one it
read for "only if nobody wrote since". The store applies the write, or refuses it
with HTTP 412, atomically, whoever else writes at the same moment. That is what
a lock, a claim on a version number and a pointer need on `gs://`, where renames
copy and there is no OS lock.

TensorFlow's `gs://` file system (`tf.io.gfile`, what TFX's `fileio` uses) sends no
preconditions, and its endpoint is fixed (TF 2.16 has `www.googleapis.com` built in:
no setting points it at another server). So these few operations go through the
Cloud Storage client library, which honours `STORAGE_EMULATOR_HOST` (the tests' real
Cloud Storage API server); the bulk copies of a model stay on `fileio`.
"""

from __future__ import annotations

import functools
import os
from typing import Any

SCHEME = "gs://"


def is_gcs(path: str | os.PathLike) -> bool:
    """Whether `path` is a Cloud Storage URI."""
    return os.fspath(path).startswith(SCHEME)


def _split(uri: str) -> tuple[str, str]:
    bucket, _, name = uri[len(SCHEME) :].partition("/")
    return bucket, name


@functools.cache
def _client(emulator_host: str | None) -> Any:
    """One client per process and endpoint (the library reads STORAGE_EMULATOR_HOST)."""
    del emulator_host  # the cache key: a test's server, or None for Cloud Storage
    from google.cloud import storage

    return storage.Client()


def _blob(uri: str) -> Any:
    bucket, name = _split(uri)
    return _client(os.environ.get("STORAGE_EMULATOR_HOST")).bucket(bucket).blob(name)


def _write(uri: str, text: str, generation: int) -> int | None:
    from google.api_core import exceptions

    blob = _blob(uri)
    try:
        blob.upload_from_string(text, if_generation_match=generation)
    except exceptions.PreconditionFailed:
        return None
    return int(blob.generation)


def create(uri: str, text: str) -> int | None:
    """Writes the object only if it is absent; its generation, or None if it exists."""
    return _write(uri, text, 0)


def replace(uri: str, text: str, generation: int) -> int | None:
    """Rewrites the object only if it is still at `generation`; the new one, or None."""
    return _write(uri, text, generation)


def read(uri: str) -> tuple[str, int] | None:
    """The object's text and the generation it was read at; None when it is absent."""
    from google.api_core import exceptions

    bucket, name = _split(uri)
    while True:
        blob = _client(os.environ.get("STORAGE_EMULATOR_HOST")).bucket(bucket).get_blob(name)
        if blob is None:
            return None
        try:  # the text of that very generation, not of a write that landed meanwhile
            return blob.download_as_text(if_generation_match=blob.generation), int(blob.generation)
        except (exceptions.PreconditionFailed, exceptions.NotFound):
            continue


def delete(uri: str, generation: int) -> bool:
    """Deletes the object only if it is still at `generation`; whether it did."""
    from google.api_core import exceptions

    try:
        _blob(uri).delete(if_generation_match=generation)
    except (exceptions.PreconditionFailed, exceptions.NotFound):
        return False
    return True
