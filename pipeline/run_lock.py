"""One run at a time per run folder.

Two runs in the same folder would train twice and race on one metadata store
and one serving folder. The lock is an OS file lock (flock): the kernel drops
it when its holder exits, however it exits (kill -9 too), so a lock left by a
dead run never blocks the next one. The lock file says who holds it.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
import pathlib
from collections.abc import Iterator

LOCK_FILE = ".run.lock"


class RunInProgressError(RuntimeError):
    """Another process is running the pipeline in this run folder."""


@contextlib.contextmanager
def exclusive_run(run_dir: pathlib.Path) -> Iterator[None]:
    """Holds `run_dir`'s lock for the block; refuses at once while another run holds it.

    Raises:
      RunInProgressError: naming the other run's process id and start time.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(run_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunInProgressError(
                f"{run_dir} is in use by another run ({_holder(fd)}): "
                "let it finish or stop it, or use another --output-dir"
            ) from None
        started = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "started": started}).encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock; the file stays, for the next run to lock


def _holder(fd: int) -> str:
    try:
        holder = json.loads(os.pread(fd, 4096, 0))
        return f"pid {holder['pid']}, started {holder['started']}"
    except (ValueError, KeyError, TypeError):  # it has locked the file but not written it yet
        return "it is just starting"
