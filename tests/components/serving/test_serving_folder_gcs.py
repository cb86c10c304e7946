"""A serving folder on Cloud Storage with two actors at once, against a real Cloud Storage
API server (fake-gcs-server): the serving lock holds one at a time, two pushes get two
versions, a failed push removes only what it wrote, and a card writer never clears or
overwrites another's files. Each fails where gs:// had no lock and no claims."""

from __future__ import annotations

import json
import threading
import time

import pytest

from tests.components.serving.test_publish import local_files, save_model
from tpu_pipeline.components.serving.publish import push_model_version, pushed_versions
from tpu_pipeline.components.serving.versions import LOCK_FILE, ServingFolderError, serving_lock


def test_two_holders_of_the_gs_serving_lock_never_overlap(gcs_bucket):
    base = f"{gcs_bucket.uri}/serving"
    inside: list[int] = []
    overlaps: list[tuple[int, int]] = []
    start = threading.Barrier(4)

    def actor(number: int) -> None:
        start.wait()
        for _ in range(3):
            with serving_lock(base, f"actor {number}", wait_seconds=60):
                if inside:
                    overlaps.append((inside[0], number))
                inside.append(number)
                time.sleep(0.05)
                inside.remove(number)

    threads = [threading.Thread(target=actor, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert overlaps == []
    claim = json.loads(gcs_bucket.objects("serving/")[f"serving/{LOCK_FILE}"])
    assert claim["released"] is True  # the last holder let go


def test_a_taken_gs_serving_lock_names_its_holder_to_whoever_waits(gcs_bucket):
    base = f"{gcs_bucket.uri}/serving"
    told: list[str] = []
    with serving_lock(base, "serving rollback"):
        with pytest.raises(ServingFolderError, match=r"lock is held by serving rollback \(pid"):
            with serving_lock(base, "a push", wait_seconds=0.6, on_wait=told.append):
                pass
    assert len(told) == 1 and told[0].startswith("serving rollback (pid")
    with serving_lock(base, "a push", wait_seconds=0):  # released: free at once
        pass


class SameSecond:
    """A clock both pushes read only once both have listed the serving folder."""

    def __init__(self, pushes: int):
        self.barrier = threading.Barrier(pushes, timeout=30)

    def __call__(self) -> float:
        self.barrier.wait()
        return 1000.0


def push_at_once(models: dict[str, str], serving: str) -> dict[str, object]:
    """Pushes each model in its own thread (named after it) in the same second;
    its result, or what it raised."""
    clock = SameSecond(len(models))
    outcomes: dict[str, object] = {}

    def push(name: str) -> None:
        try:
            outcomes[name] = push_model_version(models[name], serving, clock=clock)
        except Exception as error:  # noqa: BLE001 (the test reads it)
            outcomes[name] = error

    threads = [threading.Thread(target=push, args=(n,), name=n) for n in models]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def test_two_pushes_in_the_same_second_get_two_whole_versions(tmp_path, gcs_bucket):
    models = {"a": save_model(tmp_path / "a", 1.0), "b": save_model(tmp_path / "b", 2.0)}
    serving = f"{gcs_bucket.uri}/serving"
    outcomes = push_at_once(models, serving)

    versions = {name: result.version for name, result in outcomes.items()}
    assert sorted(versions.values()) == ["1000", "1001"]
    for name, version in versions.items():
        assert gcs_bucket.files_under(f"{serving}/{version}") == local_files(models[name])
    assert sorted(pushed_versions(serving)) == ["1000", "1001"]
    assert gcs_bucket.objects("serving/.versions/") == {}  # the claims went with the copies


def test_a_failed_push_removes_only_what_it_wrote_not_a_concurrent_push(
    tmp_path, gcs_bucket, monkeypatch
):
    models = {"a": save_model(tmp_path / "a", 1.0), "b": save_model(tmp_path / "b", 2.0)}
    serving = f"{gcs_bucket.uri}/serving"
    a_done = threading.Event()
    fs = gcs_bucket.filesystem
    real_open = fs.open.__func__

    def b_fails_after_a(cls, name, mode="r"):
        """b writes once a has written its saved_model.pb, and fails on its own."""
        writer = threading.current_thread().name if "w" in mode else None
        if writer == "b":
            a_done.wait(30)
            if name.endswith("saved_model.pb"):
                raise OSError("connection reset")
        handle = real_open(cls, name, mode)
        if writer == "a" and name.endswith("saved_model.pb"):
            close = handle.close
            handle.close = lambda: (close(), a_done.set())
        return handle

    monkeypatch.setattr(fs, "open", classmethod(b_fails_after_a))
    outcomes = push_at_once(models, serving)

    assert isinstance(outcomes["b"], OSError)
    a = outcomes["a"]
    assert pushed_versions(serving) == [a.version]
    assert gcs_bucket.files_under(serving) == {
        f"{a.version}/{name}": data for name, data in local_files(models["a"]).items()
    }


def test_a_model_card_writer_leaves_another_writers_partial_alone(tmp_path, gcs_bucket):
    from tests.components.model_card.test_card import make_facts
    from tpu_pipeline.components.model_card.card import model_card
    from tpu_pipeline.components.model_card.write import (
        CARD_JSON,
        read_model_card,
        write_model_card,
    )

    version_dir = f"{gcs_bucket.uri}/serving/1000"
    theirs = f"{version_dir}/.{CARD_JSON}.partial-0123456789ab/{CARD_JSON}"
    with gcs_bucket.filesystem.open(theirs, "w") as handle:  # a writer mid-rename
        handle.write('{"theirs": true}')

    ours = model_card(make_facts(version="1000"))
    write_model_card(version_dir, ours)

    assert gcs_bucket.objects("serving/1000/")[theirs[len(gcs_bucket.uri) + 1 :]] == (
        b'{"theirs": true}'
    )
    assert read_model_card(version_dir) == ours
    write_model_card(version_dir, model_card(make_facts(version="1001")))
    assert read_model_card(version_dir) == ours  # a card there is never written over
