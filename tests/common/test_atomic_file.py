"""One atomic write for the package: written aside, synced, renamed, the folder synced."""

from __future__ import annotations

import os

import pytest

from tpu_pipeline.common import atomic_file
from tpu_pipeline.common.atomic_file import replaced_when_done, write_text


def record_disk_calls(monkeypatch) -> list[tuple[str, str]]:
    """Logs fsync (of which path) and replace calls, in order, while letting them happen."""
    calls: list[tuple[str, str]] = []
    real_fsync_path, real_replace = atomic_file.fsync_path, os.replace

    def fsync_path(path):
        calls.append(("fsync", os.path.basename(os.fspath(path))))
        real_fsync_path(path)

    def replace(source, destination):
        calls.append(("replace", os.path.basename(os.fspath(destination))))
        real_replace(source, destination)

    monkeypatch.setattr(atomic_file, "fsync_path", fsync_path)
    monkeypatch.setattr(atomic_file.os, "replace", replace)
    return calls


def test_the_file_is_synced_before_the_rename_and_its_folder_after(tmp_path, monkeypatch):
    calls = record_disk_calls(monkeypatch)
    write_text(tmp_path / "note.json", "{}")
    assert calls == [("fsync", "note.json"), ("replace", "note.json"), ("fsync", tmp_path.name)]
    assert (tmp_path / "note.json").read_text() == "{}"


def test_the_last_successful_run_record_is_synced_too(tmp_path, monkeypatch):
    from tpu_pipeline.pipeline.wiring.input_fingerprint import InputFingerprint, record_success

    calls = record_disk_calls(monkeypatch)
    record_success(tmp_path, InputFingerprint("config", str(tmp_path), ("*",), {}))
    assert [call for call, _ in calls] == ["fsync", "replace", "fsync"]


def test_a_failed_write_keeps_the_old_file_and_leaves_nothing_beside_it(tmp_path):
    target = tmp_path / "pin.json"
    target.write_text("old")
    with pytest.raises(OSError), replaced_when_done(target) as partial:
        with open(partial, "w") as file:
            file.write("half")
        raise OSError("disk full")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["pin.json"]
