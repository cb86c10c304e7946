"""Files that appear whole or not at all: written aside, synced, then renamed over the old one.

A reader (a model server, the next run, a person) sees the old file or the new
one, never half of one, however the writer ends (an error, Ctrl-C, kill -9, a
power cut). On a local disk that takes three steps in this order: write a file
beside the target, fsync it, `os.replace` it onto the target (one atomic rename
on one file system), and fsync the folder so the rename itself survives a power
cut. On an object store (`gs://`, `s3://`) a file is one object, which appears
whole when its upload ends, so the rename there is the store's own.

The file is written inside a hidden scratch folder beside the target, under
the target's own name (Beam picks a compression from the extension, and writes
its temporary files there too); the folder goes however the block ends.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator


def is_remote(path: str | os.PathLike) -> bool:
    """Whether `path` is on an object store (`gs://...`), where a rename copies."""
    return "://" in os.fspath(path)


def fsync_path(path: str | os.PathLike) -> None:
    """Flushes a file, or a folder's entries, to the disk (a no-op on an object store)."""
    if is_remote(path):
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def scratch_prefix(name: str) -> str:
    """How the hidden scratch folders of `replaced_when_done` for a file `name` begin:
    what a writer killed mid-write leaves beside it is recognisable as the product's."""
    return f".{name}.partial-"


@contextlib.contextmanager
def replaced_when_done(path: str | os.PathLike) -> Iterator[str]:
    """Yields where to write `path`'s new content; it replaces `path` only if the block succeeds.

    An error in the block leaves `path` as it was (or absent) and nothing beside it.
    """
    path = os.fspath(path)
    folder, name = os.path.split(path)
    scratch = os.path.join(folder, f"{scratch_prefix(name)}{uuid.uuid4().hex[:12]}")
    if is_remote(path):
        from tpu_pipeline.common.tfx_api import (
            fileio,  # TensorFlow's file systems, only when needed
        )

        fileio.makedirs(scratch)
        try:
            yield os.path.join(scratch, name)
            fileio.rename(os.path.join(scratch, name), path, overwrite=True)
        finally:
            fileio.rmtree(scratch)
        return
    os.makedirs(scratch)
    try:
        yield os.path.join(scratch, name)
        fsync_path(os.path.join(scratch, name))
        os.replace(os.path.join(scratch, name), path)
        fsync_path(folder or ".")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def write_text(path: str | os.PathLike, text: str) -> None:
    """Writes `text` to the local file `path`, whole or not at all."""
    with replaced_when_done(path) as partial, open(partial, "w") as file:
        file.write(text)


def write_new_text(path: str | os.PathLike, text: str) -> None:
    """Writes `text` to the new local file `path`, whole or not at all, never over a file.

    The content is written beside, synced, then hard-linked to `path`: the link is
    made only if `path` is absent, in one step, so a file that appears meanwhile stays.

    Raises:
      FileExistsError: `path` exists (before or during the writing); it is left as it was.
    """
    path = os.fspath(path)
    folder = os.path.dirname(path) or "."
    scratch = os.path.join(folder, f".{os.path.basename(path)}.new-{uuid.uuid4().hex[:12]}")
    try:
        with open(scratch, "x") as file:
            file.write(text)
        fsync_path(scratch)
        os.link(scratch, path)
        fsync_path(folder)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(scratch)
