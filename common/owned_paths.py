"""Paths a user names stay the user's: the product writes beside what is there, and
replaces only what it wrote itself.

`git clone` refuses a non-empty folder; Keras' `ModelCheckpoint` and TensorBoard write
new files into a folder and never clear it. We do the same, and to know which files are
ours, every folder the product writes into on a user's behalf (`--output`,
`--summary-json`, `--explain-dir`, `report --output`, `compile --output`, a run folder)
holds a marker, `.tpu-pipeline` (JSON): the names of the files the product wrote there,
each with the SHA-256 of what it wrote.

- A file the product writes (`owned_file`) is new, or replaces a file the marker lists
  with the same content. A file the user made, edited or replaced is refused.
- A folder the product fills (`claim_folder`) is new, empty, or holds the marker; a
  non-empty folder without it is refused (a folder the product wrote before markers
  existed is recognised by its caller, `adopt`, and marked).
- Nothing here deletes or renames away a file; a replaced file is one the marker
  lists, replaced atomically (`common/atomic_file.py`).

A refusal is a `UserPathError` (a `ConfigError`: exit 2), one line naming the path.

Dying between two writes: the marker lists the new content before the file is
renamed into place, and keeps the old content's hash until after, so a process
killed at any point leaves a file the marker still recognises. Two writers in one
local folder update the marker in turns, under a lock on the folder, and replace it
whole, so a reader never sees half a marker; on an object store (or a file system
that cannot lock a folder) there are no turns, so a lost update can only make the
next write refuse, never replace a user's file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import posixpath
from collections.abc import Callable, Iterator

import portalocker

from tpu_pipeline.common import fileio
from tpu_pipeline.common.atomic_file import (
    is_remote,
    replaced_when_done,
    scratch_prefix,
    write_text,
)
from tpu_pipeline.common.config import ConfigError

MARKER = ".tpu-pipeline"
_CHUNK = 1 << 20


class UserPathError(ConfigError):
    """A path the user named holds something the product did not write; nothing was changed."""


def _join(folder: str, name: str) -> str:
    return posixpath.join(folder, name) if is_remote(folder) else os.path.join(folder, name)


def _split(path: str) -> tuple[str, str]:
    return posixpath.split(path) if is_remote(path) else os.path.split(path)


def content_hash(path: str) -> str:
    """SHA-256 of the file at `path` (local or on an object store), read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with fileio.open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _read_marker(folder: str) -> dict[str, list[str]] | None:
    """The files the marker in `folder` lists (name -> accepted hashes); None without one.

    A marker that cannot be read still marks the folder as the product's, listing no file.
    """
    path = _join(folder, MARKER)
    if not fileio.exists(path):
        return None
    try:
        with fileio.open(path) as handle:
            files = json.loads(handle.read() or "{}").get("files", {})
        return {name: list(hashes) for name, hashes in files.items()}
    except (ValueError, AttributeError, TypeError):
        return {}


@contextlib.contextmanager
def _writers_turn(folder: str) -> Iterator[None]:
    """Holds, for the block, one writer's turn at the marker of the local `folder`.

    The turn is a lock on the folder itself, which the kernel drops when its holder
    dies however it dies, so the folder gains no lock file of its own. Where the file
    system cannot lock a folder or open it for reading (NFS may refuse; an object store
    has no locks at all), writers go without turns: a lost update can then only make
    a later write refuse.
    """
    with contextlib.ExitStack() as turn:
        if not is_remote(folder):
            with contextlib.suppress(portalocker.LockException, OSError):
                handle = os.open(folder, os.O_RDONLY)
                turn.callback(os.close, handle)  # closing drops the lock
                portalocker.lock(handle, portalocker.LockFlags.EXCLUSIVE)
        yield


@contextlib.contextmanager
def _updating_marker(folder: str) -> Iterator[dict[str, list[str]]]:
    """Yields the marker's file list to change; written back when the block ends.

    Writers take turns (`_writers_turn`), and the marker is replaced whole: a reader,
    who takes no turn, sees the old list or the new one, and a writer killed mid-write
    leaves the old one. (Rewriting the marker in place under a lock on it let a reader
    see it empty between the truncate and the write, and refuse a file that was ours.)
    """
    path = _join(folder, MARKER)
    with _writers_turn(folder):
        files = _read_marker(folder) or {}
        yield files
        if is_remote(folder):  # one object: it appears whole when its upload ends
            with fileio.open(path, "w") as handle:
                handle.write(_marker_text(files))
        else:
            write_text(path, _marker_text(files))


def _marker_text(files: dict[str, list[str]]) -> str:
    return json.dumps({"written_by": "tpu-pipeline", "files": files}, indent=1, sort_keys=True)


def _entries(folder: str) -> list[str]:
    """The names in `folder`, but for what a writer killed while writing the marker left
    (its scratch folder: the product's, and all a killed first claim leaves)."""
    names = (name.rstrip("/") for name in fileio.listdir(folder))
    return [name for name in names if not name.startswith(scratch_prefix(MARKER))]


def check_claimable(
    folder: str | os.PathLike,
    what: str,
    adopt: Callable[[list[str]], bool] | None = None,
) -> bool:
    """Refuses, before any work, a folder the product may not write into; changes nothing.

    Args:
      folder: the folder the user named (or a default beside what they named).
      what: the flag or setting that named it, for the refusal ("--explain-dir").
      adopt: for folders the product wrote before it marked them: told the names in
        an unmarked non-empty folder, says whether they are all the product's.

    Returns:
      Whether the folder exists without a marker (empty, or to adopt).

    Raises:
      UserPathError: `folder` is a file, or a non-empty folder without the marker
        that `adopt` does not recognise.
    """
    folder = os.fspath(folder)
    if not fileio.exists(folder):
        return False
    if not fileio.isdir(folder):
        raise UserPathError(f"{what} {folder}: is a file, not a folder")
    if _read_marker(folder) is not None:
        return False
    names = _entries(folder)
    if names and not (adopt is not None and adopt(names)):
        raise UserPathError(
            f"{what} {folder}: the folder holds files tpu-pipeline did not write; "
            "name a new or empty folder"
        )
    return True


def claim_folder(
    folder: str | os.PathLike,
    what: str,
    adopt: Callable[[list[str]], bool] | None = None,
) -> str:
    """Makes `folder` one the product may write into (creating it, marked); returns it.

    Raises:
      UserPathError: see `check_claimable`; nothing is changed.
    """
    folder = os.fspath(folder)
    check_claimable(folder, what, adopt)  # refused before anything is made
    fileio.makedirs(folder)
    with _updating_marker(folder) as files:
        # Looked at again in turn with the other writers: one may have marked the folder
        # meanwhile, or a user's file appeared in it, which is refused, never adopted.
        if not fileio.exists(_join(folder, MARKER)):
            check_claimable(folder, what, adopt)
            for name in _entries(folder):
                path = _join(folder, name)
                if name != MARKER and not fileio.isdir(path):
                    files[name] = [content_hash(path)]
    return folder


def check_replaceable(path: str | os.PathLike, what: str) -> None:
    """Refuses, before any work, a file the product may not replace at `path`.

    Raises:
      UserPathError: `path` is a folder, or a file the marker beside it does not list
        with its current content.
    """
    path = os.fspath(path)
    if not fileio.exists(path):
        return
    if fileio.isdir(path):
        raise UserPathError(f"{what} {path}: is a folder; name a file")
    folder, name = _split(path)
    listed = (_read_marker(folder or ".") or {}).get(name, [])
    if not listed or content_hash(path) not in listed:
        raise UserPathError(
            f"{what} {path}: the file exists and tpu-pipeline did not write it; "
            "name a new file or move that one away"
        )


@contextlib.contextmanager
def owned_file(path: str | os.PathLike, what: str) -> Iterator[str]:
    """Yields where to write `path`'s content; it lands on `path` only if the block succeeds
    and `path` is new or a file the product wrote (checked before and again after the block).

    Raises:
      UserPathError: see `check_replaceable`; nothing is written.
    """
    path = os.fspath(path)
    check_replaceable(path, what)
    folder, name = _split(path)
    folder = folder or "."
    fileio.makedirs(folder)
    with replaced_when_done(path) as partial:
        yield partial
        check_replaceable(path, what)  # a file of the user's may have appeared meanwhile
        new_hash = content_hash(partial)
        with _updating_marker(folder) as files:  # before the rename: a death after it is safe
            files[name] = sorted({*files.get(name, []), new_hash})
    with _updating_marker(folder) as files:
        files[name] = [new_hash]


def write_owned(path: str | os.PathLike, data: str | bytes, what: str) -> None:
    """Writes `data` to `path` whole, under `owned_file`'s rule."""
    with (
        owned_file(path, what) as partial,
        fileio.open(partial, "wb" if isinstance(data, bytes) else "w") as handle,
    ):
        handle.write(data)
