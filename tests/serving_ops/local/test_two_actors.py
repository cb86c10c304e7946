"""Two serving commands on one run folder: the run lock makes them take turns, the lease
says whose an intent is, and an intent another machine holds is never finished early.

A's action is interrupted at each of its steps (the intent written, the folder moved,
ML Metadata followed) by B's whole action: B waits for nothing and must change nothing.
An intent written by another machine sharing the folder (whose lock this kernel cannot
see) is waited for while its lease is live and finished, saying whose it was, once the
lease has expired.
"""

from __future__ import annotations

import time

import pytest

from tests.serving_ops.local.test_actions import run_folder, with_a_refused_model
from tests.serving_ops.local.test_baseline import baseline
from tpu_pipeline.components.serving.publish import pushed_versions
from tpu_pipeline.components.serving.versions import set_aside_versions
from tpu_pipeline.serving_ops.local import actions as serving_actions
from tpu_pipeline.serving_ops.local import blessing as manual_blessing
from tpu_pipeline.serving_ops.local import folder
from tpu_pipeline.serving_ops.local.actions import ServingActionError
from tpu_pipeline.serving_ops.local.intent_file import (
    INTENT_FILE,
    Intent,
    read_intent,
    write_intent,
)
from tpu_pipeline.serving_ops.protocol import Owner

A, B = Owner("a@this-host", 1, "aaaaaa"), Owner("b@this-host", 2, "bbbbbb")


def snapshot(config) -> tuple:
    """What serves, what is set aside, the pin, and the next run's baseline."""
    base = str(config.serving_dir)
    return (
        pushed_versions(base),
        set_aside_versions(base),
        (config.serving_dir / ".pinned.json").exists(),
        baseline(config.metadata_path),
    )


def b_action(config, action: str, refused_model: int | None):
    """B's whole action, refusing at once when A holds the run folder."""
    kwargs = {"wait_seconds": 0, "tell": lambda line: None, "owner": B}
    if action == "rollback":
        return serving_actions.rollback(config, "B's reason", **kwargs)
    if action == "pin":
        return serving_actions.pin(config, "100", "B's pin", **kwargs)
    if action == "unpin":
        return serving_actions.unpin(config, **kwargs)
    return serving_actions.bless(config, "B's blessing", refused_model, **kwargs)


STEPS = {  # where A's action is interrupted: the module, the function, its step
    "the intent written": (serving_actions.LocalStore, "claim"),
    "the folder moved": (folder, "rollback"),
    "ML Metadata followed": (serving_actions, "_follow"),
}


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("b", ["rollback", "pin", "unpin", "bless"])
def test_a_second_command_during_any_step_of_a_rollback_changes_nothing(
    tmp_path, monkeypatch, step, b
):
    from tests.cli.test_serving_commands import passing_check

    passing_check(monkeypatch)
    config, older, newer = run_folder(tmp_path)
    refused = with_a_refused_model(tmp_path, config)
    owner_of_step, name = STEPS[step]
    original = getattr(owner_of_step, name)
    seen: list = []

    def interrupted(*args, **kwargs):
        before = snapshot(config)
        with pytest.raises(ServingActionError, match=r"nothing changed: .* in use by another"):
            b_action(config, b, refused)
        seen.append(snapshot(config) == before)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner_of_step, name, interrupted)
    lines = serving_actions.rollback(config, "A's reason", owner=A)

    assert seen == [True]  # B ran at that step, and changed nothing
    assert lines[0].startswith("rolled back 101 to ")
    assert set_aside_versions(str(config.serving_dir)) == ["101"]
    assert baseline(config.metadata_path) == older
    assert not (config.run_dir / INTENT_FILE).exists()
    monkeypatch.setattr(owner_of_step, name, original)
    try:  # once A is done, it is B's turn (its own refusals are its own)
        b_action(config, b, refused)
    except ServingActionError as error:
        assert "in use by another" not in str(error)
    assert read_intent(config.run_dir) is None


@pytest.mark.parametrize("a", ["pin", "restore", "bless"])
def test_a_second_command_during_a_publishing_action_changes_nothing(tmp_path, monkeypatch, a):
    from tests.cli.test_serving_commands import passing_check

    passing_check(monkeypatch)
    config, _, _ = run_folder(tmp_path)
    refused = with_a_refused_model(tmp_path, config)
    if a == "restore":
        serving_actions.rollback(config, "set aside first", owner=A)
    seen: list = []
    steps = [(serving_actions.LocalStore, "claim"), (serving_actions, "_follow")]
    steps.append((manual_blessing, "record") if a == "bless" else (folder, a))
    for owner_of_step, name in steps:
        original = getattr(owner_of_step, name)

        def interrupted(*args, original=original, **kwargs):
            before = snapshot(config)
            with pytest.raises(ServingActionError, match="nothing changed"):
                b_action(config, "rollback", refused)
            seen.append(snapshot(config) == before)
            return original(*args, **kwargs)

        monkeypatch.setattr(owner_of_step, name, interrupted)
    if a == "pin":
        serving_actions.pin(config, "100", "A's pin", owner=A)
    elif a == "restore":
        serving_actions.restore(config, "101", owner=A)
    else:
        serving_actions.bless(config, "A's blessing", refused, owner=A)

    assert seen and all(seen)
    assert read_intent(config.run_dir) is None


def other_machines_rollback(config, until: float) -> Intent:
    """A rollback another machine began on the shared folder: the folder moved, ML Metadata
    not yet; its intent is as that machine wrote it."""
    folder.rollback(str(config.serving_dir), "wrong labels")
    intent = Intent(
        "rollback",
        "101",
        set_aside=("101",),
        owner="ops@other-host",
        pid=7,
        started="2026-12-05T13:00:00+00:00",
        holder="cccccc",
        since=until - 900,
        until=until,
    )
    write_intent(config.run_dir, intent)
    return intent


def test_a_live_intent_of_another_machine_is_waited_for_then_refused_untouched(tmp_path):
    config, _, newer = run_folder(tmp_path)
    intent = other_machines_rollback(config, until=time.time() + 600)
    told: list[str] = []

    with pytest.raises(ServingActionError) as refused:
        serving_actions.pin(config, "100", "mine", wait_seconds=1.5, tell=told.append, owner=B)

    message = str(refused.value)
    assert message.startswith("serving pin: nothing changed: `serving rollback` of 101 ")
    assert "(ops@other-host, pid 7, started 2026-12-05T13:00:00+00:00), in progress" in message
    assert message.endswith("still after 1.5 s: let it finish, or try later")
    assert told[0].startswith("waiting up to 1.5 s for `serving rollback` of 101 (ops@other-host")
    assert read_intent(config.run_dir) == intent  # never finished early
    assert baseline(config.metadata_path) == newer


def test_serving_list_leaves_a_live_intent_of_another_machine_alone_and_says_so(tmp_path):
    config, _, newer = run_folder(tmp_path)
    intent = other_machines_rollback(config, until=time.time() + 600)
    told: list[str] = []

    serving_actions.finish_interrupted_action_if_free(config, told.append, owner=B)

    assert read_intent(config.run_dir) == intent
    assert baseline(config.metadata_path) == newer
    (line,) = told
    assert line.startswith("`serving rollback` of 101 (ops@other-host, pid 7, ")
    assert line.endswith("left to it")


def test_an_expired_intent_of_another_machine_is_finished_saying_whose_it_was(tmp_path):
    config, older, _ = run_folder(tmp_path)
    other_machines_rollback(config, until=time.time() - 1)
    told: list[str] = []

    lines = serving_actions.unpin(config, tell=told.append, owner=B)

    assert told == [
        "finished the interrupted `serving rollback` of 101 (ops@other-host, pid 7, "
        "started 2026-12-05T13:00:00+00:00): baseline: withdrawn 1 blessing(s) in ML Metadata"
    ]
    assert lines == ["nothing was pinned"]
    assert baseline(config.metadata_path) == older
    assert read_intent(config.run_dir) is None


def test_an_intent_written_here_is_finished_at_once_the_run_lock_proves_its_owner_gone(
    tmp_path,
):
    config, older, _ = run_folder(tmp_path)
    intent = other_machines_rollback(config, until=time.time() + 600)
    here = Intent(**{**intent.__dict__, "owner": A.name.replace("this-host", _hostname())})
    write_intent(config.run_dir, here)
    told: list[str] = []

    serving_actions.unpin(config, tell=told.append, owner=B)

    assert told[0].startswith("finished the interrupted `serving rollback` of 101 (a@")
    assert baseline(config.metadata_path) == older


def test_a_failed_step_ends_its_lease_so_the_next_command_need_not_wait(tmp_path, monkeypatch):
    config, older, _ = run_folder(tmp_path)

    def store_down(config):
        raise RuntimeError("ML Metadata is down")

    monkeypatch.setattr(serving_actions, "_follow", store_down)
    with pytest.raises(ServingActionError, match="changed the serving folder"):
        serving_actions.rollback(config, "wrong labels", owner=A)
    left = read_intent(config.run_dir)
    assert left.holder == A.token and left.until <= time.time()  # its lease ended with it

    monkeypatch.undo()
    told: list[str] = []
    serving_actions.unpin(config, tell=told.append, owner=B)
    assert told[0].startswith("finished the interrupted `serving rollback` of 101 (a@this-host")
    assert baseline(config.metadata_path) == older


def _hostname() -> str:
    import socket

    return socket.gethostname()
