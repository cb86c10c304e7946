"""Two actors on one registry entry at once: every interleaving ends as if they took turns.

Actor A runs one action (pin, rollback, restore, bless, push) against `VertexServer`; at
its k-th call, for every k, actor B runs a whole action of its own and only then does A's
call go through. B waits for nothing (a live intent of A's makes it refuse at once); A
waits as long as it needs. Whatever the point, the entry must end as one of the orders in
which the two could have taken turns (B's refusal included), no intent may be left, no
label may ever be written blind, the rolled-back label must never be lost, and a version
labelled rolled back must never get `default`, traffic or a deploy.
"""

from __future__ import annotations

import functools

import pytest
from google.api_core import exceptions

from tests.serving_ops.vertex.server import MODEL, STORE, VertexServer
from tests.serving_ops.vertex.test_pusher import saved_model_dir
from tpu_pipeline.common.config import load_config
from tpu_pipeline.serving_ops.protocol import OperationError, Owner, Patience
from tpu_pipeline.serving_ops.vertex import actions, blessing
from tpu_pipeline.serving_ops.vertex.entry import (
    DEFAULT_ALIAS,
    FINGERPRINT_LABEL,
    PINNED_ALIAS,
    ROLLED_BACK_LABEL,
    Registry,
)
from tpu_pipeline.serving_ops.vertex.intents import INTENT_LABELS
from tpu_pipeline.serving_ops.vertex.pusher import register_model_version

URI = "gs://my-bucket/root/Trainer/model/7/Format-Serving"
CONFIG = load_config("kubeflow/vertex-tpu.yaml")
SETTINGS = CONFIG.vertex.model_registry
OWNERS = {"a": Owner("a@host-a", 1, "aaaaaa"), "b": Owner("b@host-b", 2, "bbbbbb")}


def starting_server(tmp_path) -> VertexServer:
    """Version 3 serves; 4 was rolled back; the endpoint serves 3 and keeps 2 deployed."""
    server = VertexServer()
    server.entry(
        (),
        (),
        (DEFAULT_ALIAS,),
        (),
        **{f"v{i}": {FINGERPRINT_LABEL: f"f{i}"} for i in (1, 2, 3)},
        v4={FINGERPRINT_LABEL: "f4", ROLLED_BACK_LABEL: "1796000000"},
    )
    server.endpoint(("12", "2"), ("13", "3"))
    server.model_artifact("gs://my-bucket/root/Trainer/model/7", f"{STORE}/artifacts/model-7")
    return server


def registry_of(server: VertexServer, actor: str, lines: list[str]) -> Registry:
    vertex = CONFIG.vertex
    return Registry(
        CONFIG, vertex.location, SETTINGS, server.transport(actor), lines.append, MODEL, []
    )


def run(server: VertexServer, actor: str, action: str, tmp_path, wait: float) -> str:
    """Runs one action as `actor`; "done", or the first line of what refused it."""
    lines: list[str] = []
    owner = OWNERS[actor]
    patience = Patience(seconds=wait, clock=server.clock, sleep=server.sleep)
    try:
        if action == "push":
            register_model_version(
                push_candidate(tmp_path),
                SETTINGS,
                "p",
                "us-central1",
                server.transport(actor),
                say=lines.append,
                owner=owner,
                wait_seconds=wait,
            )
            return "done"
        registry = registry_of(server, actor, lines)
        registry.reread()
        if action == "bless":
            actions.bless(registry, URI, "accepted by the PO", patience, owner)
        else:
            version = {"pin": "1", "restore": "4", "rollback": None}[action]
            actions.move(registry, action, version, "bad labels", patience, owner)
    except OperationError as refused:
        return str(refused).splitlines()[0]
    return "done"


@functools.cache
def _candidate(folder: str) -> str:
    import pathlib

    return saved_model_dir(pathlib.Path(folder), 8)


def push_candidate(tmp_path) -> str:
    return _candidate(str(tmp_path))


@pytest.fixture(autouse=True)
def stubs(monkeypatch):
    """The blessed model's fingerprint and its serving check: both have their own tests."""
    monkeypatch.setattr(blessing, "model_label", lambda uri: "f7")
    monkeypatch.setattr(actions, "serving_check", lambda config, uri: "passed (stub)")


def state(server: VertexServer) -> dict:
    """What serves and what is set aside, by model (fingerprint), and the baselines."""
    by_id = {v.version_id: v.labels.get(FINGERPRINT_LABEL) for v in server.versions().values()}
    endpoint = next(iter(server.endpoints.values()))
    traffic = {
        d.model_version_id for d in endpoint.deployed_models if endpoint.traffic_split.get(d.id)
    }
    return {
        "versions": {
            by_id[v.version_id]: (
                tuple(sorted(v.version_aliases)),
                ROLLED_BACK_LABEL in v.labels,
                blessing.BLESSED_LABEL in v.labels,
            )
            for v in server.versions().values()
        },
        "traffic": sorted(by_id[v] for v in traffic),
        "deployed": sorted(by_id[d.model_version_id] for d in endpoint.deployed_models),
        "withdrawn": sorted(
            name.rsplit("-", 1)[1]
            for name, artifact in server.artifacts.items()
            if "/blessing-" in name and artifact.metadata.get("tpu_pipeline_withdrawn_by")
        ),
    }


def check_invariants(server: VertexServer) -> None:
    """What must hold after any interleaving (and, for the last two, at every call)."""
    assert server.blind_writes == []
    for version in server.versions().values():
        assert INTENT_LABELS.isdisjoint(version.labels), version
        if ROLLED_BACK_LABEL in version.labels:
            assert DEFAULT_ALIAS not in version.version_aliases, version
    endpoint = next(iter(server.endpoints.values()))
    for deployed in endpoint.deployed_models:
        if endpoint.traffic_split.get(deployed.id):
            assert ROLLED_BACK_LABEL not in server.version(deployed.model_version_id).labels


def never_serving_a_rolled_back_version(server: VertexServer):
    """A hook: a deploy or a traffic move to a version labelled rolled back fails the test."""

    def hook(sent):
        if sent.method == "DeployModel":
            version_id = sent.request.deployed_model.model.split("@")[1]
            if version_id in server.versions():
                assert ROLLED_BACK_LABEL not in server.version(version_id).labels
        if sent.method == "MergeVersionAliases" and DEFAULT_ALIAS in sent.request.version_aliases:
            version_id = sent.request.name.split("@")[1]
            assert ROLLED_BACK_LABEL not in server.version(version_id).labels, sent.request

    return hook


def rolled_back_labels(server: VertexServer) -> set[str]:
    return {
        v.labels[FINGERPRINT_LABEL]
        for v in server.versions().values()
        if ROLLED_BACK_LABEL in v.labels
    }


@functools.cache
def serial(order: tuple[str, ...], tmp: str) -> tuple[dict, tuple[str, ...]]:
    """The state after the actions of `order` took turns, and what each said."""
    import pathlib

    server = starting_server(pathlib.Path(tmp))
    said = tuple(run(server, actor, action, pathlib.Path(tmp), 0) for actor, action in order)
    return state(server), said


ACTIONS = ("pin", "rollback", "restore", "bless", "push")
PAIRS = [(a, b) for a in ACTIONS for b in ACTIONS]


def calls_of(action: str, tmp_path) -> int:
    server = starting_server(tmp_path)
    run(server, "a", action, tmp_path, 3600)
    return len([s for s in server.sent if s.actor == "a"])


@pytest.mark.parametrize("a_action, b_action", PAIRS, ids=[f"{a}-then-{b}" for a, b in PAIRS])
def test_two_actors_interleaved_at_every_call_end_as_if_they_took_turns(
    tmp_path, a_action, b_action, monkeypatch
):
    tmp = str(tmp_path)
    alone_a, said_a = serial((("a", a_action),), tmp)
    alone_b, said_b = serial((("b", b_action),), tmp)
    a_then_b, _ = serial((("a", a_action), ("b", b_action)), tmp)
    b_then_a, _ = serial((("b", b_action), ("a", a_action)), tmp)
    assert said_a == ("done",) and said_b == ("done",)  # each can be done alone
    for k in range(calls_of(a_action, tmp_path)):
        server = starting_server(tmp_path)
        rolled_back_before = rolled_back_labels(server)
        b_said: list[str] = []

        def b_acts_now(sent, k=k, server=server, b_said=b_said):
            if sent.actor == "a" and len([s for s in server.sent if s.actor == "a"]) == k:
                server.hooks.remove(b_acts_now)
                b_said.append(run(server, "b", b_action, tmp_path, 0))

        server.hooks += [b_acts_now, never_serving_a_rolled_back_version(server)]
        a_said = run(server, "a", a_action, tmp_path, 3600)

        check_invariants(server)
        final = state(server)
        where = f"B's {b_action} before A's call {k} ({a_said!r}, {b_said!r})"
        if a_said == "done" and b_said == ["done"]:
            assert final in (a_then_b, b_then_a), where
        elif a_said == "done":
            assert final == alone_a, where
            assert b_said[0].endswith("let it finish, or try later"), where  # A's live intent
        else:
            assert b_said == ["done"] and final == alone_b, where
        # A rolled-back label goes only by a restore of that version (4, the one restored).
        lost = rolled_back_before - rolled_back_labels(server)
        assert lost <= {"f4"} and (not lost or "restore" in {a_action, b_action}), where


def when_a_sends(server: VertexServer, method: str, act) -> None:
    """Runs `act()` once, just before A's first `method` call reaches the server."""

    def hook(sent):
        if sent.actor == "a" and sent.method == method:
            server.hooks.remove(hook)
            act()

    server.hooks.append(hook)


def b_lists(server: VertexServer) -> list[str]:
    """`serving list --vertex` as B: the lines it prints."""
    lines: list[str] = []
    registry = registry_of(server, "b", lines)
    registry.reread()
    lines.extend(actions.list_versions(registry, OWNERS["b"]))
    return lines


def test_a_stalled_owner_loses_its_lease_and_its_action_is_finished_by_another(tmp_path):
    """A's process stalls (a paused VM) longer than its lease in the middle of its pin: B
    takes the intent over and finishes the pin saying whose it was, and A stops at its next
    step, undoing nothing."""
    server = starting_server(tmp_path)
    b_said: list[str] = []

    def stall_then_b():
        server.now += 3600  # longer than a lease
        b_said.extend(b_lists(server))

    when_a_sends(server, "MergeVersionAliases", stall_then_b)
    said = run(server, "a", "pin", tmp_path, 3600)

    assert f"{MODEL}@1: the pin of " in b_said[0]
    assert b_said[0].endswith(" by a_host-a-1-aaaaaa was left half done; finishing it")
    assert said.endswith(": its lease ran out")
    check_invariants(server)
    assert PINNED_ALIAS in server.version("1").version_aliases
    assert server.default() == "1"


@pytest.mark.parametrize("conflict", [exceptions.Aborted, exceptions.FailedPrecondition])
@pytest.mark.parametrize("action", ACTIONS)
def test_a_label_another_writer_adds_at_any_moment_is_never_lost(tmp_path, action, conflict):
    """Someone labels versions in the console while an action runs (between any read and
    write of it): the action's writes are refused on the stale `etag`, decided again, and
    both the console's label and the rolled-back labels survive."""
    for k in range(calls_of(action, tmp_path)):
        server = starting_server(tmp_path)
        server.conflict = conflict

        def console(sent, k=k, server=server):
            if sent.actor == "a" and len([s for s in server.sent if s.actor == "a"]) == k:
                for version in server.versions().values():  # as the console writes: all of it
                    version.labels = {**version.labels, "team": "vision"}
                    version.etag = server._etag()

        server.hooks.append(console)
        assert run(server, "a", action, tmp_path, 3600) == "done", k
        check_invariants(server)
        labelled = [v for v in server.versions().values() if v.labels.get("team") == "vision"]
        assert len(labelled) >= 4, k  # every version the console saw keeps its label
        expected, _ = serial((("a", action),), str(tmp_path))
        assert state(server) == expected, k


def test_a_write_refused_for_a_stale_etag_is_decided_again_from_a_new_read(tmp_path):
    server = starting_server(tmp_path)
    sneaked = []

    def rolled_back_meanwhile(sent):  # between the rollback's read of 3 and its write
        if sent.actor == "a" and sent.method == "UpdateModel" and not sneaked:
            version = server.version(sent.request.model.name.split("@")[1])
            version.labels = {**version.labels, "owner_note": "checked"}
            version.etag = server._etag()
            sneaked.append(version.version_id)

    server.hooks.append(rolled_back_meanwhile)
    assert run(server, "a", "rollback", tmp_path, 3600) == "done"

    refused = [s for s in server.sent if s.method == "UpdateModel"][0]
    assert refused.request.model.etag != server.version(sneaked[0]).etag
    assert server.version(sneaked[0]).labels["owner_note"] == "checked"
    assert ROLLED_BACK_LABEL in server.version("3").labels and server.default() == "2"
    check_invariants(server)


def test_serving_list_never_finishes_a_live_intent_of_another_actor(tmp_path):
    server = starting_server(tmp_path)
    listed: list[str] = []
    when_a_sends(server, "MergeVersionAliases", lambda: listed.extend(b_lists(server)))

    assert run(server, "a", "rollback", tmp_path, 3600) == "done"

    assert [s for s in server.sent if s.actor == "b" and s.method.startswith("Update")] == []
    assert any("rollback by a_host-a-1-aaaaaa in progress (lease until" in line for line in listed)
    check_invariants(server)


def test_a_command_waits_for_a_live_intent_within_its_bound_then_acts(tmp_path):
    """B starts while A is at work and may wait a second: it says whom it waits for, gives up
    with nothing changed; once A is done, B acts on what A left."""
    server = starting_server(tmp_path)
    waits: list[str] = []

    def b_waits():
        registry = registry_of(server, "b", waits)
        registry.reread()
        patience = Patience(seconds=1, clock=server.clock, sleep=server.sleep, poll=1)
        with pytest.raises(OperationError, match="still after 1 s"):
            actions.move(registry, "pin", "1", "later", patience, OWNERS["b"])

    when_a_sends(server, "MergeVersionAliases", b_waits)
    assert run(server, "a", "rollback", tmp_path, 3600) == "done"
    assert waits and waits[0].startswith(f"waiting up to 1 s for {MODEL}@3: the rollback of ")
    assert [s for s in server.sent if s.actor == "b" and s.method.startswith("Update")] == []
    assert run(server, "b", "pin", tmp_path, 3600) == "done"  # once A is done, B goes on
    check_invariants(server)


def test_owner_labels_name_the_actor_and_fit_a_label_value():
    from tpu_pipeline.serving_ops.vertex.intents import owner_label

    long = Owner("Someone.With.A.Very.Long.Name@build-machine-" + "x" * 80, 123456, "abcdef")
    label = owner_label(long)
    assert len(label) <= 63 and label.endswith("-123456-abcdef")
    assert set(label) <= set("abcdefghijklmnopqrstuvwxyz0123456789_-")


def test_a_busy_entry_refuses_with_one_line_naming_the_action_and_its_owner(tmp_path):
    server = starting_server(tmp_path)
    said: list[str] = []
    when_a_sends(
        server, "MergeVersionAliases", lambda: said.append(run(server, "b", "restore", tmp_path, 0))
    )

    assert run(server, "a", "rollback", tmp_path, 3600) == "done"
    (line,) = said
    assert line.startswith(f"{MODEL}@3: the rollback of ")
    assert "by a_host-a-1-aaaaaa, in progress (lease until " in line


def test_a_long_upload_keeps_its_claim_alive_so_no_one_takes_it_over(tmp_path, monkeypatch):
    """A bless's upload takes twice a lease; the claim is renewed while it is waited for, and
    B, trying a rollback in the middle of it, finds the action still in progress."""
    import concurrent.futures

    server = starting_server(tmp_path)
    upload = server._upload_model
    b_said: list[str] = []

    class Slow:
        """The upload's operation: done after four looks of five minutes each."""

        def __init__(self, done):
            self.done, self.looks = done, 0

        def result(self, timeout=None):
            self.looks += 1
            if self.looks > 4:
                return self.done.result()
            server.now += 300
            if self.looks == 3:
                b_said.append(run(server, "b", "rollback", tmp_path, 0))
            raise concurrent.futures.TimeoutError

    monkeypatch.setattr(server, "_upload_model", lambda request: Slow(upload(request)))

    assert run(server, "a", "bless", tmp_path, 3600) == "done"

    (refused,) = b_said
    assert refused.endswith("let it finish, or try later")  # A's claim was live, 15 min in
    assert [
        s for s in server.sent if s.actor == "b" and not s.method.startswith(("Get", "List"))
    ] == []
    check_invariants(server)
