"""Moving versions of a local serving folder aside and back, without ever losing one.

TF Serving serves the highest all-digit version folder (`components/serving/versions.py`
describes the layout). So rollback and pin move versions out of its way, into
`.rolled_back/<version>/`, each with a note `.rolled_back/<version>.json` saying why,
when and who; nothing is deleted and `restore` moves a version back. Each move is one
`os.rename` on one file system: a crash (kill -9 too) leaves a version either served or
set aside, never half-moved, and a note without its folder is ignored. The serving
folder's lock makes rollback, pin, restore and the Pusher's publish take turns, so two
at once never pick the same version.

A pin is also written down (`.pinned.json`): a highest-version server would serve the
next run's push over it, so while the pin stands the Pusher publishes nothing. Moves
need a local disk: on Cloud Storage a folder rename copies object by object (STACK.md),
and there the Model Registry's aliases do this job (`serving_ops/vertex/`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import os
from collections.abc import Callable
from typing import Any

from tpu_pipeline.common.atomic_file import is_remote, write_text
from tpu_pipeline.components.serving.publish import pushed_versions
from tpu_pipeline.components.serving.versions import (
    PIN_FILE,
    ROLLED_BACK_DIR,
    ServingFolderError,
    note_path,
    pinned,
    read_json,
    rolled_back_dir,
    serving_lock,
    set_aside_versions,
)
from tpu_pipeline.serving_ops.protocol import operator_name


@dataclasses.dataclass(frozen=True)
class Version:
    """One version of the serving folder.

    Attributes:
      version: the folder name (digits).
      path: where it is now (in place, or under `.rolled_back/`).
      serving: whether a highest-version server serves it.
      note: why it was set aside (reason, when, who, how), or None while in place.
    """

    version: str
    path: str
    serving: bool
    note: dict[str, Any] | None = None


@dataclasses.dataclass(frozen=True)
class LockWait:
    """How long a move waits for the serving folder's lock, and whom it tells it waits.

    Attributes:
      seconds: the bound (None: for as long as the holder holds it).
      on_wait: told who holds the lock (what, pid, since when) when the move starts waiting.
    """

    seconds: float | None = None
    on_wait: Callable[[str], None] | None = None


# A move waits for as long as the holder holds the lock unless its action bounds the wait.
UNBOUNDED_WAIT = LockWait()


def _require_local(base_directory: str) -> None:
    if is_remote(base_directory):
        raise ServingFolderError(
            f"{base_directory}: moving versions needs a local serving folder (on Cloud "
            "Storage a rename copies object by object); on Vertex AI use --vertex"
        )


def _write_json(path: str, content: dict[str, Any]) -> None:
    write_text(path, json.dumps(content, indent=2))


def list_versions(base_directory: str) -> list[Version]:
    """Every version, in place or set aside, oldest first; the newest in place serves."""
    in_place = pushed_versions(base_directory)
    versions = [
        Version(name, os.path.join(base_directory, name), serving=name == in_place[-1])
        for name in in_place
    ]
    versions += [
        Version(
            name,
            os.path.join(rolled_back_dir(base_directory), name),
            serving=False,
            note=read_json(note_path(base_directory, name)),
        )
        for name in set_aside_versions(base_directory)
    ]
    return sorted(versions, key=lambda v: int(v.version))


def _set_aside(
    base_directory: str, version: str, note: dict[str, Any], clock: Callable[[], datetime.datetime]
) -> None:
    """Moves one version into `.rolled_back/`, the note first (a lone note is ignored)."""
    os.makedirs(rolled_back_dir(base_directory), exist_ok=True)
    if os.path.exists(os.path.join(rolled_back_dir(base_directory), version)):
        raise ServingFolderError(
            f"{base_directory}: version {version} is both served and in {ROLLED_BACK_DIR}/; "
            "move one of them away by hand"
        )
    when = clock().astimezone().isoformat(timespec="seconds")
    _write_json(note_path(base_directory, version), {**note, "when": when, "who": operator_name()})
    os.rename(
        os.path.join(base_directory, version),
        os.path.join(rolled_back_dir(base_directory), version),
    )


def rollback(
    base_directory: str,
    reason: str,
    clock: Callable[[], datetime.datetime] = datetime.datetime.now,
    wait: LockWait = UNBOUNDED_WAIT,
) -> tuple[Version, Version]:
    """Sets the served version aside so the one before it serves; returns (rolled back, now served).

    Raises:
      ServingFolderError: fewer than two versions in place (nothing to go back to),
        or the lock stayed taken longer than `wait.seconds`.
    """
    _require_local(base_directory)
    with serving_lock(base_directory, "serving rollback", wait.seconds, wait.on_wait):
        record = pinned(base_directory)
        if record:
            raise ServingFolderError(
                f"{base_directory}: serving is pinned to {record['version']}; pin another "
                "version, or `tpu-pipeline serving unpin` first"
            )
        in_place = pushed_versions(base_directory)
        if len(in_place) < 2:
            raise ServingFolderError(
                f"{base_directory}: {len(in_place)} version(s) in place, nothing to roll back "
                "to; `tpu-pipeline serving list` shows the versions set aside"
            )
        newest = in_place[-1]
        _set_aside(base_directory, newest, {"action": "rollback", "reason": reason}, clock)
    return _find(base_directory, newest), _find(base_directory, in_place[-2])


def pin(
    base_directory: str,
    version: str,
    reason: str,
    clock: Callable[[], datetime.datetime] = datetime.datetime.now,
    wait: LockWait = UNBOUNDED_WAIT,
    before_serving: Callable[[str], None] | None = None,
) -> list[str]:
    """Makes `version` the served one: newer versions go aside, and the Pusher stops.

    A version set aside earlier is restored first, after `before_serving(its folder)`
    (what that raises stops the pin, nothing moved). Pinning again is safe: it moves
    only what is not where the pin wants it. Returns the versions moved aside.

    Raises:
      ServingFolderError: there is no such version, or the lock stayed taken too long.
    """
    _require_local(base_directory)
    with serving_lock(base_directory, "serving pin", wait.seconds, wait.on_wait):
        if version in set_aside_versions(base_directory):
            if before_serving is not None:
                before_serving(os.path.join(rolled_back_dir(base_directory), version))
            _move_back(base_directory, version)
        in_place = pushed_versions(base_directory)
        if version not in in_place:
            raise ServingFolderError(
                f"{base_directory}: no version {version}; `tpu-pipeline serving list` shows them"
            )
        newer = [name for name in in_place if int(name) > int(version)]
        for name in reversed(newer):  # newest first: each step leaves a valid served version
            note = {"action": "pin", "reason": f"pinned to {version}: {reason}"}
            _set_aside(base_directory, name, note, clock)
        when = clock().astimezone().isoformat(timespec="seconds")
        pin_record = {"version": version, "reason": reason, "when": when, "who": operator_name()}
        _write_json(os.path.join(base_directory, PIN_FILE), pin_record)
    return newer


def unpin(base_directory: str, wait: LockWait = UNBOUNDED_WAIT) -> dict[str, Any] | None:
    """Removes the pin (the versions it set aside stay aside); returns the pin it removed."""
    _require_local(base_directory)
    with serving_lock(base_directory, "serving unpin", wait.seconds, wait.on_wait):
        record = pinned(base_directory)
        if record:
            os.remove(os.path.join(base_directory, PIN_FILE))
    return record


def restore(
    base_directory: str,
    version: str,
    wait: LockWait = UNBOUNDED_WAIT,
    before_serving: Callable[[str], None] | None = None,
) -> Version:
    """Moves a version set aside back in place (it serves again if it is the newest).

    `before_serving(its folder)` runs first; what it raises stops the restore, nothing moved.

    Raises:
      ServingFolderError: no such version set aside, a pin to an older version
        stands, or the lock stayed taken longer than `wait.seconds`.
    """
    _require_local(base_directory)
    with serving_lock(base_directory, "serving restore", wait.seconds, wait.on_wait):
        if version not in set_aside_versions(base_directory):
            raise ServingFolderError(
                f"{base_directory}: no version {version} in {ROLLED_BACK_DIR}/; "
                "`tpu-pipeline serving list` shows the versions set aside"
            )
        record = pinned(base_directory)
        if record and int(version) > int(record["version"]):
            raise ServingFolderError(
                f"{base_directory}: serving is pinned to {record['version']}; "
                "`tpu-pipeline serving unpin` first"
            )
        if before_serving is not None:
            before_serving(os.path.join(rolled_back_dir(base_directory), version))
        _move_back(base_directory, version)
    return _find(base_directory, version)


def _move_back(base_directory: str, version: str) -> None:
    """The folder first, then its note: a crash between leaves a lone note, ignored."""
    target = os.path.join(base_directory, version)
    if os.path.exists(target):
        raise ServingFolderError(f"{target} exists; refusing to replace it")
    os.rename(os.path.join(rolled_back_dir(base_directory), version), target)
    with contextlib.suppress(FileNotFoundError):
        os.remove(note_path(base_directory, version))


def _find(base_directory: str, version: str) -> Version:
    return next(v for v in list_versions(base_directory) if v.version == version)
