"""The serving folder's layout: which versions serve, which are set aside, the pin, the lock.

TF Serving (and any server given `--model_base_path`) serves the highest
all-digit version folder. Versions a person took out of service sit in
`.rolled_back/<version>/` (a hidden folder no server reads), each with a note
`.rolled_back/<version>.json` saying why, when and who; a pin is written down in
`.pinned.json`. The moves themselves (rollback, pin, restore, unpin) are the
serving control plane's (`serving_ops/local/folder.py`); the Pusher needs only
what is here: the lock every change of the folder takes, and why a model must
not be published now (`push_refusal`).
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import posixpath
from collections.abc import Callable, Iterator
from typing import Any

from tpu_pipeline.common import fileio
from tpu_pipeline.common.atomic_file import is_remote
from tpu_pipeline.common.file_lock import LockBusyError, held_lock
from tpu_pipeline.common.gcs_objects import is_gcs
from tpu_pipeline.common.store_lock import held_store_lock
from tpu_pipeline.components.serving.publish import model_fingerprint, pushed_versions

ROLLED_BACK_DIR = ".rolled_back"
PIN_FILE = ".pinned.json"
LOCK_FILE = ".serving.lock"


class ServingFolderError(RuntimeError):
    """The operation cannot be done on this serving folder (says why and what to do)."""


def exists(base_directory: str) -> bool:
    """Whether the serving folder is there (a model was pushed to it once)."""
    return fileio.isdir(base_directory)


@contextlib.contextmanager
def serving_lock(
    base_directory: str,
    what: str = "a push",
    wait_seconds: float | None = None,
    on_wait: Callable[[str], None] | None = None,
) -> Iterator[None]:
    """Holds the serving folder's lock as `what`.

    On a local disk an OS file lock (`common/file_lock.py`): the kernel drops it when
    its holder dies, so a killed operation never blocks the next one. On Cloud Storage
    a claim object with a lease (`common/store_lock.py`): taken only if absent or
    abandoned, by a generation precondition, so a dead holder's claim is taken over
    once its lease runs out. Either says who holds it (what, pid, since when), for
    whoever waits. Other object stores have no lock here.

    Args:
      base_directory: the serving folder.
      what: what the holder does, for the message of whoever waits.
      wait_seconds: how long to wait for another holder (None: for as long as it holds it).
      on_wait: told who holds the lock, once, when the first try finds it taken.

    Raises:
      ServingFolderError: another holder kept it longer than `wait_seconds`.
    """
    if is_remote(base_directory) and not is_gcs(base_directory):
        yield
        return
    with contextlib.ExitStack() as stack:
        try:
            if is_gcs(base_directory):
                lock_uri = posixpath.join(base_directory, LOCK_FILE)
                stack.enter_context(held_store_lock(lock_uri, what, wait_seconds, on_wait))
            else:
                os.makedirs(base_directory, exist_ok=True)
                lock_path = pathlib.Path(base_directory) / LOCK_FILE
                stack.enter_context(held_lock(lock_path, what, wait_seconds, on_wait))
        except LockBusyError as error:
            raise ServingFolderError(
                f"{base_directory}: the serving folder's lock is {error}"
            ) from None
        yield


def rolled_back_dir(base_directory: str) -> str:
    """Where set-aside versions are kept."""
    return os.path.join(base_directory, ROLLED_BACK_DIR)


def note_path(base_directory: str, version: str) -> str:
    """The note saying why `version` was set aside."""
    return os.path.join(rolled_back_dir(base_directory), f"{version}.json")


def read_json(path: str) -> dict[str, Any] | None:
    """A note or the pin record; None when the file is not there."""
    if not fileio.exists(path):
        return None
    with fileio.open(path, "r") as file:
        return json.loads(file.read())


def set_aside_versions(base_directory: str) -> list[str]:
    """Versions under `.rolled_back/` (a whole model each), oldest first."""
    return pushed_versions(rolled_back_dir(base_directory))


def pinned(base_directory: str) -> dict[str, Any] | None:
    """The pin record (version, reason, when, who), or None when nothing is pinned."""
    return read_json(os.path.join(base_directory, PIN_FILE))


def push_refusal(model_dir: str, base_directory: str) -> str | None:
    """Why the Pusher must not publish `model_dir` now, or None.

    A pin stands, or the same model (by fingerprint) was set aside: a rolled-back
    model is never served again by a later run unless a person restores it.
    """
    record = pinned(base_directory)
    if record:
        return (
            f"serving is pinned to version {record['version']} ({record['reason']}); "
            "`tpu-pipeline serving unpin` to push again"
        )
    fingerprint = model_fingerprint(model_dir)
    for version in set_aside_versions(base_directory):
        if model_fingerprint(os.path.join(rolled_back_dir(base_directory), version)) == fingerprint:
            note = read_json(note_path(base_directory, version)) or {}
            return (
                f"this model was rolled back as version {version} ({note.get('reason', '')}); "
                f"`tpu-pipeline serving restore {version}` to serve it again"
            )
    return None
