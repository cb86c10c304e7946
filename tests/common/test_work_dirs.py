"""Work folders a process owns while it lives: a live owner's survives every clean-up, a killed
owner's goes with the next clean-up of its kind, and two clean-ups never fight over one."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import subprocess
import sys
from collections.abc import Iterator

import psutil
import pytest

from tpu_pipeline.common import work_dirs
from tpu_pipeline.common.config import REPO_ROOT
from tpu_pipeline.common.work_dirs import OWNER_LOCK_FILE, WorkDirs

KIND = WorkDirs("test-kind", "test work folder")

# An owner of a work folder, in a process of its own: it makes the folder and waits to be
# killed. Its `os.getpid` returns the pid given, as the pid namespace of another container
# sharing the temporary folder would.
_OWNER = """
import os, pathlib, sys, time
from tpu_pipeline.common.work_dirs import WorkDirs
os.getpid = lambda: int(sys.argv[2])
with WorkDirs("test-kind", "test work folder").owned(pathlib.Path(sys.argv[1])) as work_dir:
    print(work_dir, flush=True)
    time.sleep(600)
"""


@dataclasses.dataclass(frozen=True)
class _Owner:
    process: subprocess.Popen
    work_dir: pathlib.Path


@contextlib.contextmanager
def _owner(temp_dir: pathlib.Path, pid_in_name: int) -> Iterator[_Owner]:
    """A live owner of a work folder in `temp_dir`, whose name carries `pid_in_name`;
    killed after the block."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    with subprocess.Popen(
        [sys.executable, "-c", _OWNER, str(temp_dir), str(pid_in_name)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    ) as process:
        try:
            yield _Owner(process, pathlib.Path(process.stdout.readline().strip()))
        finally:
            process.kill()


def _finished_pid() -> int:
    """The pid of a process that has ended: no process here has it."""
    finished = subprocess.Popen([sys.executable, "-c", ""])
    finished.wait()
    return finished.pid


def test_a_live_owners_work_dir_survives_clean_up_whatever_pid_its_name_carries(tmp_path):
    unknown_pid = _finished_pid()
    with _owner(tmp_path, unknown_pid) as owner:
        assert owner.work_dir.name.startswith(f"{KIND.prefix}{unknown_pid}-")
        assert not psutil.pid_exists(unknown_pid)
        (owner.work_dir / "weights.npz").write_bytes(b"weights")

        assert KIND.remove_abandoned(tmp_path) == []
        with KIND.owned(tmp_path) as mine:  # which cleans up first, too
            assert mine != owner.work_dir
        assert (owner.work_dir / "weights.npz").read_bytes() == b"weights"
        assert owner.process.poll() is None


def test_the_work_dir_of_an_owner_killed_by_sigkill_is_removed_by_the_next_of_its_kind(tmp_path):
    other = tmp_path / "someone-elses-folder"
    other.mkdir()
    with _owner(tmp_path, 1) as owner:  # pid 1: every pid namespace has one
        assert owner.work_dir.name.startswith(f"{KIND.prefix}1-")
        (owner.work_dir / "weights.npz").write_bytes(b"weights")
        owner.process.kill()  # SIGKILL: no `finally` runs
        owner.process.wait()

        another_kind = WorkDirs("test-other", "other work folder")
        with another_kind.owned(tmp_path):
            assert owner.work_dir.exists()  # not its kind
        with KIND.owned(tmp_path) as mine:
            assert not owner.work_dir.exists()
            assert sorted(tmp_path.iterdir()) == sorted([other, mine])
        assert sorted(tmp_path.iterdir()) == [other]


def test_a_work_dir_being_made_is_left_alone(tmp_path, monkeypatch):
    """Another process's clean-up runs the instant the folder exists, before its owner has
    locked it; the owner's name carries a pid no process here has."""
    dead_pid = _finished_pid()
    monkeypatch.setattr(work_dirs.os, "getpid", lambda: dead_pid)
    removed_meanwhile = []
    mkdtemp = work_dirs.tempfile.mkdtemp

    def mkdtemp_then_clean_up(**kwargs):
        made = mkdtemp(**kwargs)
        removed_meanwhile.extend(KIND.remove_abandoned(tmp_path))
        return made

    monkeypatch.setattr(work_dirs.tempfile, "mkdtemp", mkdtemp_then_clean_up)
    with KIND.owned(tmp_path) as work_dir:
        assert removed_meanwhile == []
        assert work_dir.name.startswith(f"{KIND.prefix}{dead_pid}-")
        (work_dir / "weights.npz").write_bytes(b"weights")
        assert KIND.remove_abandoned(tmp_path) == []  # a clean-up of this process too
        assert (work_dir / "weights.npz").read_bytes() == b"weights"
    assert list(tmp_path.iterdir()) == []  # its owner removed it


def _abandoned_work_dir(temp_dir: pathlib.Path) -> pathlib.Path:
    """A work folder as an owner killed by SIGKILL leaves it: its lock file, free, and weights."""
    work_dir = temp_dir / f"{KIND.prefix}1-abandoned"
    work_dir.mkdir()
    (work_dir / OWNER_LOCK_FILE).write_text("")
    (work_dir / "weights.npz").write_bytes(b"weights")
    return work_dir


def test_a_clean_up_racing_another_leaves_the_folder_to_the_one_holding_its_lock(
    tmp_path, monkeypatch
):
    abandoned = _abandoned_work_dir(tmp_path)
    second = []
    remove = WorkDirs._remove

    def remove_after_another_clean_up(self, work_dir):
        second.extend(KIND.remove_abandoned(tmp_path))  # starts while the first removes
        remove(self, work_dir)

    monkeypatch.setattr(WorkDirs, "_remove", remove_after_another_clean_up)
    assert KIND.remove_abandoned(tmp_path) == [abandoned]
    assert second == [] and list(tmp_path.iterdir()) == []


def test_a_clean_up_cut_short_leaves_the_folder_to_the_next(tmp_path, monkeypatch):
    abandoned = _abandoned_work_dir(tmp_path)

    def interrupted(self, work_dir):
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:
        patched.setattr(WorkDirs, "_remove", interrupted)
        with pytest.raises(KeyboardInterrupt):
            KIND.remove_abandoned(tmp_path)
    assert (abandoned / "weights.npz").exists()
    assert KIND.remove_abandoned(tmp_path) == [abandoned]
    assert list(tmp_path.iterdir()) == []


def test_a_folder_without_a_lock_file_is_not_taken_for_an_abandoned_one(tmp_path):
    someone_elses = tmp_path / f"{KIND.prefix}1-theirs"
    someone_elses.mkdir()
    (someone_elses / "notes.txt").write_text("mine")

    assert KIND.remove_abandoned(tmp_path) == []
    assert (someone_elses / "notes.txt").read_text() == "mine"


def test_a_symlink_under_the_kinds_name_is_not_followed_into_the_folder_it_points_to(tmp_path):
    temp_dir, elsewhere = tmp_path / "tmp", tmp_path / "users-folder"
    temp_dir.mkdir()
    elsewhere.mkdir()
    (elsewhere / OWNER_LOCK_FILE).write_text("")  # a free lock, as an abandoned folder has
    (elsewhere / "photos.txt").write_text("theirs")
    planted = temp_dir / f"{KIND.prefix}1-planted"
    planted.symlink_to(elsewhere)

    assert KIND.remove_abandoned(temp_dir) == []
    assert (elsewhere / "photos.txt").read_text() == "theirs"
    assert planted.is_symlink()
