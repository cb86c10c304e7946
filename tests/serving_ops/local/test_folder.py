"""Rollback, pin and restore move versions aside and back, and never lose one.

The moves are `serving_ops/local/folder.py`'s; the Pusher's refusal reads the same folder
(`components/serving/versions.py`).
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import shutil
import subprocess
import sys
import threading

import pytest

from tests.components.serving.test_publish import Clock, save_model
from tpu_pipeline.common.config import REPO_ROOT
from tpu_pipeline.components.serving.publish import push_model_version, pushed_versions
from tpu_pipeline.components.serving.versions import (
    ServingFolderError,
    push_refusal,
    set_aside_versions,
)
from tpu_pipeline.serving_ops.local import folder
from tpu_pipeline.serving_ops.local.folder import list_versions, pin, restore, rollback, unpin

WHEN = datetime.datetime(2026, 12, 1, 14, 0, tzinfo=datetime.timezone.utc)


def serving_folder(tmp_path, count: int) -> tuple[str, list[str]]:
    """A serving folder with `count` versions of distinct models; returns it and the models."""
    base = str(tmp_path / "serving_model")
    models = [save_model(tmp_path / f"model-{i}", float(i)) for i in range(count)]
    for i, model in enumerate(models):
        push_model_version(model, base, clock=Clock(100 + i))
    return base, models


def every_version(base: str) -> list[str]:
    """Version names in place or set aside, each once, in order."""
    return sorted(pushed_versions(base) + set_aside_versions(base), key=int)


def served(base: str) -> str:
    return next(v.version for v in list_versions(base) if v.serving)


def test_list_marks_the_newest_version_as_the_served_one(tmp_path):
    base, _ = serving_folder(tmp_path, 3)

    assert [(v.version, v.serving, v.note) for v in list_versions(base)] == [
        ("100", False, None),
        ("101", False, None),
        ("102", True, None),
    ]


def test_rolling_back_twice_serves_the_oldest_and_keeps_both_with_notes(tmp_path):
    base, _ = serving_folder(tmp_path, 3)

    rolled_back, now_served = rollback(base, "accuracy dropped in production", clock=lambda: WHEN)
    assert (rolled_back.version, now_served.version) == ("102", "101")
    assert rollback(base, "still bad")[0].version == "101"

    assert pushed_versions(base) == ["100"] and served(base) == "100"
    assert every_version(base) == ["100", "101", "102"]
    note = next(v.note for v in list_versions(base) if v.version == "102")
    assert note["reason"] == "accuracy dropped in production"
    assert note["action"] == "rollback"
    assert note["when"] == WHEN.astimezone().isoformat(timespec="seconds")
    assert "@" in note["who"]
    assert (pathlib.Path(base) / ".rolled_back" / "102" / "saved_model.pb").is_file()
    with pytest.raises(ServingFolderError, match="nothing to roll back to"):
        rollback(base, "the last one")


def test_restore_serves_a_rolled_back_version_again(tmp_path):
    base, _ = serving_folder(tmp_path, 2)
    rollback(base, "bad")

    assert restore(base, "101").serving
    assert pushed_versions(base) == ["100", "101"] and set_aside_versions(base) == []
    assert not (pathlib.Path(base) / ".rolled_back" / "101.json").exists()
    with pytest.raises(ServingFolderError, match="no version 101 in .rolled_back"):
        restore(base, "101")


def test_pin_sets_newer_versions_aside_and_stops_the_pusher_until_unpinned(tmp_path):
    base, models = serving_folder(tmp_path, 3)

    assert pin(base, "100", "known good") == ["101", "102"]

    assert served(base) == "100" and every_version(base) == ["100", "101", "102"]
    new_model = save_model(tmp_path / "new", 9.0)
    assert "pinned to version 100 (known good)" in push_refusal(new_model, base)
    with pytest.raises(ServingFolderError, match="pinned to 100"):
        restore(base, "102")
    with pytest.raises(ServingFolderError, match="pinned to 100"):
        rollback(base, "while pinned")
    assert unpin(base)["version"] == "100"
    assert push_refusal(new_model, base) is None
    assert restore(base, "102").serving


def test_pinning_a_rolled_back_version_brings_it_back(tmp_path):
    base, _ = serving_folder(tmp_path, 3)
    rollback(base, "bad")

    assert pin(base, "102", "it was fine after all") == []
    assert served(base) == "102"
    with pytest.raises(ServingFolderError, match="no version 7"):
        pin(base, "7", "typo")


def test_a_rolled_back_model_is_refused_until_restored(tmp_path):
    base, models = serving_folder(tmp_path, 2)
    rollback(base, "wrong labels")

    refusal = push_refusal(models[1], base)
    assert "rolled back as version 101 (wrong labels)" in refusal
    assert "serving restore 101" in refusal
    assert push_refusal(models[0], base) is None  # the one in place: push says "already served"
    restore(base, "101")
    assert push_refusal(models[1], base) is None


def test_the_pusher_does_not_push_a_rolled_back_model_again(tmp_path):
    from tpu_pipeline.common.config import load_config
    from tpu_pipeline.common.tfx_api import standard_artifacts
    from tpu_pipeline.components.contract import pusher_sections
    from tpu_pipeline.components.pusher import PUSH_REFUSED_PROPERTY, AtomicPusherExecutor

    base, models = serving_folder(tmp_path, 2)
    rollback(base, "wrong labels")
    model = standard_artifacts.Model()
    model.uri = str(tmp_path / "trainer-output")
    shutil.copytree(models[1], tmp_path / "trainer-output" / "Format-Serving")
    blessing = standard_artifacts.ModelBlessing()
    blessing.set_int_custom_property("blessed", 1)
    pushed_model = standard_artifacts.PushedModel()
    pushed_model.uri = str(tmp_path / "pushed")
    destination = {"filesystem": {"base_directory": base}}

    AtomicPusherExecutor().Do(
        {"model": [model], "model_blessing": [blessing]},
        {"pushed_model": [pushed_model]},
        {
            "push_destination": json.dumps(destination),
            "custom_config": json.dumps(pusher_sections(load_config())),
        },
    )

    assert pushed_model.get_int_custom_property("pushed") == 0
    assert "rolled back as version 101" in pushed_model.get_string_custom_property(
        PUSH_REFUSED_PROPERTY
    )
    assert pushed_versions(base) == ["100"]


def test_two_rollbacks_at_once_each_set_one_version_aside(tmp_path):
    base, _ = serving_folder(tmp_path, 4)
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def roll_back():
        start.wait()
        try:
            rollback(base, "at once")
        except BaseException as error:  # noqa: BLE001 (reported below)
            errors.append(error)

    threads = [threading.Thread(target=roll_back) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert pushed_versions(base) == ["100", "101"]
    assert set_aside_versions(base) == ["102", "103"]


def test_a_crash_between_the_note_and_the_move_leaves_the_version_served(tmp_path, monkeypatch):
    base, _ = serving_folder(tmp_path, 2)

    def killed(source, destination):
        raise KeyboardInterrupt

    monkeypatch.setattr(folder.os, "rename", killed)
    with pytest.raises(KeyboardInterrupt):
        rollback(base, "interrupted")
    monkeypatch.undo()

    assert pushed_versions(base) == ["100", "101"] and served(base) == "101"
    assert [v.version for v in list_versions(base)] == ["100", "101"]  # the lone note is ignored
    assert rollback(base, "again")[0].version == "101"


# Rolls back and restores for ever, printing a line after each move, until killed.
_MOVER = """
import sys
from tpu_pipeline.serving_ops.local.folder import restore, rollback
base = sys.argv[1]
while True:
    rolled_back, _ = rollback(base, "loop")
    print("moved", flush=True)
    restore(base, rolled_back.version)
    print("moved", flush=True)
"""


def test_kill_9_in_the_middle_of_moves_loses_no_version(tmp_path):
    base, _ = serving_folder(tmp_path, 3)
    mover = subprocess.Popen(
        [sys.executable, "-c", _MOVER, base],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    try:
        for _ in range(25):  # killed while moving, wherever it is after 25 moves
            assert mover.stdout.readline() == "moved\n"
    finally:
        mover.kill()
        mover.wait()

    assert every_version(base) == ["100", "101", "102"]
    assert pushed_versions(base)[:2] == ["100", "101"]
    rollback(base, "the lock died with its holder")  # would hang if the lock outlived it
