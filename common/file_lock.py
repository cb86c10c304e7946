"""OS file locks that say who holds them, and wait a bounded time for them.

The lock is portalocker's (`flock` on Linux): the kernel drops it when its
holder dies, however it dies (kill -9 too), so a lock left by a dead process
never blocks the next one. The holder writes what it does, its pid and since
when it took the lock into the file, so whoever waits can say what it waits for; the file
stays after the lock is released, for the next holder to lock and rewrite.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import pathlib
from collections.abc import Callable, Iterator

import portalocker


class LockBusyError(RuntimeError):
    """Another process held the lock for longer than the caller would wait.

    Attributes:
      holder: who holds it, in words ("run (pid 12, started 2026-12-01T14:00:00+00:00)").
    """

    def __init__(self, message: str, holder: str):
        super().__init__(message)
        self.holder = holder


def holder_of(path: pathlib.Path) -> str:
    """Who holds (or last held) the lock at `path`, in words."""
    try:
        holder = json.loads(path.read_text())
        return f"{holder['what']} (pid {holder['pid']}, started {holder['started']})"
    except (OSError, ValueError, KeyError, TypeError):  # locked, not written yet
        return "a process that is just starting"


@contextlib.contextmanager
def held_lock(
    path: pathlib.Path,
    what: str,
    wait_seconds: float | None = 0,
    on_wait: Callable[[str], None] | None = None,
) -> Iterator[None]:
    """Holds the lock at `path` for the block, as `what` (written into the file for others).

    Args:
      path: the lock file (created if missing; its folder must exist).
      what: what the holder does, for the message of whoever waits ("run", "serving rollback").
      wait_seconds: how long to wait for another holder: 0 refuses at once, None waits for ever.
      on_wait: told who holds the lock, once, when the first try finds it taken.

    Raises:
      LockBusyError: the lock was still taken after `wait_seconds`.
    """
    lock = portalocker.Lock(path, mode="a", fail_when_locked=True)
    try:
        handle = lock.acquire()
    except portalocker.AlreadyLocked:
        holder = holder_of(path)
        if wait_seconds == 0:
            raise LockBusyError(f"held by {holder}", holder) from None
        if on_wait is not None:
            on_wait(holder)
        try:
            # portalocker waits by retrying; a long wait is a very large timeout.
            timeout = 10**9 if wait_seconds is None else wait_seconds
            handle = lock.acquire(timeout=timeout, fail_when_locked=False)
        except portalocker.AlreadyLocked:
            holder = holder_of(path)
            message = f"held by {holder}, still after {wait_seconds:g} s"
            raise LockBusyError(message, holder) from None
    try:
        started = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"what": what, "pid": os.getpid(), "started": started}))
        handle.flush()
        yield
    finally:
        lock.release()  # unlocks and closes; the file stays for the next holder
