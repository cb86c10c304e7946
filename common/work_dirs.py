"""Work folders in the temporary folder that a process owns while it lives, and that the next
process of the same kind removes if their owner died without removing them.

A `kill -9` skips every `finally`, so a work folder made with `tempfile` stays behind for
good; the training child's holds a whole model's weights, the serving check's a copy of
the candidate. Each kind of work folder here is named `tpu-pipeline-<kind>-<pid>-<random>`
and holds a lock file its owner keeps locked for the folder's whole life: the kernel
releases the lock however the owner dies, so a folder whose lock can be taken is
abandoned. Pids decide nothing (the pid in a name is for people): containers that share
the temporary folder each have their own pid namespace, where the pid in a name is
another process or none.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import pathlib
import shutil
import stat
import tempfile
from collections.abc import Iterator

import portalocker

from tpu_pipeline.common.file_lock import held_lock

# In a work folder: the lock its owner holds while it lives.
OWNER_LOCK_FILE = "owner.lock"


@dataclasses.dataclass(frozen=True)
class WorkDirs:
    """One kind of work folder (`kind`: "training", "serving-check", ...).

    Attributes:
      kind: the kind's name, in the folders' names; no kind's name and a dash start another's.
      what: the folders in words, for the lock file and warnings ("training work folder").
    """

    kind: str
    what: str

    @property
    def prefix(self) -> str:
        """The name of every folder of this kind starts so: the pid and a random part follow."""
        return f"tpu-pipeline-{self.kind}-"

    @property
    def new_prefix(self) -> str:
        """A folder before its owner holds its lock: a name no clean-up looks for."""
        return f"tpu-pipeline-new-{self.kind}-"

    @contextlib.contextmanager
    def owned(self, temp_dir: pathlib.Path | None = None) -> Iterator[pathlib.Path]:
        """A new work folder in `temp_dir` (the temporary folder by default), this process's
        for the block and removed after it; abandoned ones of this kind are removed first.

        The folder is made under another name and takes its final one only once the lock is
        held: no clean-up ever sees a folder whose owner has not locked it yet. A `kill -9` in
        that instant leaves an empty folder under the first name.
        """
        temp_dir = pathlib.Path(tempfile.gettempdir()) if temp_dir is None else temp_dir
        self.remove_abandoned(temp_dir)
        new = pathlib.Path(tempfile.mkdtemp(prefix=self.new_prefix, dir=temp_dir))
        random_part = new.name[len(self.new_prefix) :]
        work_dir = temp_dir / f"{self.prefix}{os.getpid()}-{random_part}"
        with held_lock(new / OWNER_LOCK_FILE, self.what):
            new.rename(work_dir)  # the lock is on the file, whatever its folder is called
            try:
                yield work_dir
            finally:
                self._remove(work_dir)

    def remove_abandoned(self, temp_dir: pathlib.Path) -> list[pathlib.Path]:
        """Removes the folders of this kind whose owner died without removing them; returns them.

        A folder is removed while this clean-up holds its lock, so a second clean-up running
        at the same time skips it, and a clean-up that stops midway (an error, `kill -9`)
        releases the lock for the next. The lock file is opened, never created: a folder
        without one (its removal almost done, or someone else's) is left alone, as is
        anything under the name that is not a real folder of this user (a symlink planted in
        the shared folder would otherwise lead the removal into the folder it points to).
        """
        abandoned = []
        for work_dir in sorted(temp_dir.glob(f"{self.prefix}*")):
            if not _made_by_this_user(work_dir):
                continue
            # flock, as `held_lock`'s: a failed try from this process does not free its own lock.
            lock = portalocker.Lock(work_dir / OWNER_LOCK_FILE, mode="r", fail_when_locked=True)
            try:
                lock.acquire()
            except (portalocker.LockException, OSError):  # held: its owner lives; or no lock file
                continue
            try:
                self._remove(work_dir)
            finally:
                lock.release()
            if not work_dir.exists():
                abandoned.append(work_dir)
        return abandoned

    def _remove(self, work_dir: pathlib.Path) -> None:
        """Removes a work folder whose lock this process holds. The lock file goes last: a
        removal cut short leaves a folder whose lock the next clean-up can still take."""
        try:
            for entry in work_dir.iterdir():
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                elif entry.name != OWNER_LOCK_FILE:
                    entry.unlink()
            (work_dir / OWNER_LOCK_FILE).unlink()
            work_dir.rmdir()
        except OSError as error:
            logging.getLogger(__name__).warning(
                "Could not remove the %s %s: %s", self.what, work_dir, error
            )


def _made_by_this_user(path: pathlib.Path) -> bool:
    """Whether `path` itself (not what a symlink points to) is a folder this user owns."""
    try:
        status = path.lstat()
    except OSError:
        return False
    return stat.S_ISDIR(status.st_mode) and status.st_uid == os.getuid()
