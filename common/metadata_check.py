"""Checks a run folder's ML Metadata store before a run or a report opens it.

A damaged SQLite file otherwise surfaces deep inside MLMD as a raw traceback
("database disk image is malformed"), or only midway through a run. The store
is the run history (cache, baseline model); the artifacts it points to live
beside it, so moving it aside loses history, not models or data. We never
move or delete it ourselves.
"""

from __future__ import annotations

import contextlib
import pathlib
import sqlite3

from ml_metadata.proto import metadata_store_pb2


class DamagedMetadataError(RuntimeError):
    """The ML Metadata store cannot be read."""


class LockedMetadataError(RuntimeError):
    """Another process holds the ML Metadata store locked: not damaged, but unusable now."""


def check_metadata_store(path: pathlib.Path) -> None:
    """Raises `DamagedMetadataError` if the SQLite store at `path` exists but is damaged.

    SQLite's own quick_check reads every page (milliseconds for a store of
    hundreds of runs). A missing store is fine: the run creates it. A store
    another process holds locked raises `LockedMetadataError`: "database is
    locked" is no damage, and moving the store aside would lose its history.
    """
    if not path.exists():
        return
    try:
        with contextlib.closing(sqlite3.connect(path)) as connection:
            problems = [row[0] for row in connection.execute("PRAGMA quick_check")]
    except sqlite3.OperationalError as error:
        if "locked" not in str(error):  # SQLite waited its 5 s for the lock first
            raise DamagedMetadataError(_damaged(path, str(error))) from None
        raise LockedMetadataError(
            f"{path} is locked by another process ({error}); it is not damaged: "
            "try again once that process is done"
        ) from None
    except sqlite3.DatabaseError as error:
        problems = [str(error)]
    if problems != ["ok"]:
        raise DamagedMetadataError(_damaged(path, problems[0]))


def _damaged(path: pathlib.Path, problem: str) -> str:
    return (
        f"{path} is damaged ({problem}): move it aside "
        f"(mv {path} {path}.damaged) and run again; the artifacts and pushed models "
        "beside it stay, but the next run starts a new history (no cache, no baseline)"
    )


def checked_connection(
    path: pathlib.Path, *, writable: bool
) -> metadata_store_pb2.ConnectionConfig:
    """MLMD's connection to the SQLite store at `path`, after `check_metadata_store`;
    read-only unless `writable`.

    The caller makes sure the store exists: connecting to a missing SQLite store creates one.
    """
    check_metadata_store(path)
    modes = metadata_store_pb2.SqliteMetadataSourceConfig
    connection = metadata_store_pb2.ConnectionConfig()
    connection.sqlite.filename_uri = str(path)
    connection.sqlite.connection_mode = modes.READWRITE if writable else modes.READONLY
    return connection
