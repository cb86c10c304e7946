"""Rollback, pin, unpin and restore on Vertex AI: registry aliases and labels, and the endpoint.

Requests are decided offline from version lists (aiplatform_v1 types, as the API returns
them); the CLI is driven through `cli.main` against `server.VertexServer`, which answers
as the API reference says (etags included) and records every call.
"""

from __future__ import annotations

import datetime
import json

import pytest

from tests.serving_ops.vertex.server import MODEL, VertexServer, serving
from tpu_pipeline.cli.main import main
from tpu_pipeline.common import vertex_types as gca
from tpu_pipeline.serving_ops.vertex.aliases import RegistryActionError, registry_change
from tpu_pipeline.serving_ops.vertex.intents import INTENT_LABEL, LEASE_LABEL, OWNER_LABEL
from tpu_pipeline.serving_ops.vertex.pusher import (
    FINGERPRINT_LABEL,
    PINNED_ALIAS,
    ROLLED_BACK_LABEL,
)

NOW = datetime.datetime(2026, 12, 1, 14, 0, tzinfo=datetime.timezone.utc)


def version(version_id: str, *aliases: str, **labels: str) -> gca.Model:
    return gca.Model(
        name=MODEL, version_id=version_id, version_aliases=list(aliases), labels=labels
    )


def dry_run(monkeypatch, capsys, server, *argv, config="kubeflow/vertex-tpu.yaml") -> list[dict]:
    """The calls `serving ARGV --vertex --dry-run` makes, as it prints them (JSON)."""
    capsys.readouterr()
    assert serving(monkeypatch, server, *argv, "--dry-run", config=config) == 0
    return json.loads(capsys.readouterr().out)


def changes(printed: list[dict]) -> list[dict]:
    """The calls a dry run would have sent that change something (it sent none of them)."""
    return [call for call in printed if not call["sent"]]


def labels_written(call: dict) -> dict:
    return call["request"]["model"].get("labels", {})


def test_rollback_labels_the_default_version_then_moves_default_to_the_one_before():
    versions = [version("1"), version("2"), version("3", "default", **{FINGERPRINT_LABEL: "ab"})]

    change = registry_change("rollback", MODEL, versions, reason="wrong labels", now=NOW)
    label, move = change.calls.values()

    assert label.method == "ModelService.UpdateModel"
    assert label.request.model.name == f"{MODEL}@3"
    assert dict(label.request.model.labels) == {
        FINGERPRINT_LABEL: "ab",  # kept: the Pusher still recognises the model
        ROLLED_BACK_LABEL: str(int(NOW.timestamp())),
    }
    assert "wrong labels" in label.request.model.version_description
    assert list(label.request.update_mask.paths) == ["labels", "version_description"]
    assert move.method == "ModelService.MergeVersionAliases"
    assert (move.request.name, list(move.request.version_aliases)) == (f"{MODEL}@2", ["default"])
    assert change.serving == "2"


def test_a_second_rollback_skips_versions_rolled_back_before():
    versions = [
        version("1"),
        version("2", "default"),
        version("3", **{ROLLED_BACK_LABEL: "1"}),
    ]
    change = registry_change("rollback", MODEL, versions, reason="again", now=NOW)
    assert change.calls["move_default_alias"].request.name == f"{MODEL}@1"

    versions = [version("1", **{ROLLED_BACK_LABEL: "1"}), version("2", "default")]
    with pytest.raises(RegistryActionError, match="nothing to roll back to"):
        registry_change("rollback", MODEL, versions, reason="no more", now=NOW)


def test_serving_rollback_vertex_dry_run_is_the_real_rollback_sending_no_change(
    monkeypatch, capsys
):
    server = VertexServer()
    server.entry((), (), ("default",), v3={FINGERPRINT_LABEL: "ab"})
    server.endpoint(("12", "2"), ("13", "3"))  # vertex-tpu.yaml names an endpoint: it follows

    printed = dry_run(monkeypatch, capsys, server, "rollback", "--reason", "bad")

    assert server.changes() == []  # nothing was changed: reads only
    lookup = printed[0]
    assert lookup["method"] == "ModelService.ListModels" and lookup["sent"]
    assert lookup["request"]["filter"] == 'display_name="tpu-pipeline-digits"'
    assert printed[1]["method"] == "ModelService.ListModelVersions"
    assert printed[1]["request"]["name"] == MODEL
    writes = changes(printed)
    first, last = labels_written(writes[0]), writes[-1]
    # The intent first, on the version rolled back; its removal last.
    assert writes[0]["request"]["model"]["name"] == f"{MODEL}@3"
    assert first[INTENT_LABEL].startswith("rollback-2-") and OWNER_LABEL in first
    assert last["method"] == "ModelService.UpdateModel" and INTENT_LABEL not in labels_written(last)
    label = next(c for c in writes if ROLLED_BACK_LABEL in labels_written(c))
    assert label["request"]["model"]["name"] == f"{MODEL}@3"
    assert labels_written(label)[FINGERPRINT_LABEL] == "ab"  # kept: the Pusher still knows it
    assert label["request"]["model"]["etag"]  # a read-modify-write, never a blind overwrite
    move = next(c for c in writes if c["method"] == "ModelService.MergeVersionAliases")
    assert move["request"] == {"name": f"{MODEL}@2", "versionAliases": ["default"]}
    withdraw = next(c for c in writes if c["method"] == "MetadataService.UpdateArtifact")
    assert withdraw["request"]["artifact"]["name"].endswith("/blessing-3")
    assert withdraw["request"]["artifact"]["metadata"]["blessed"] == 0
    split = next(c for c in writes if c["method"] == "EndpointService.UpdateEndpoint")
    assert split["request"]["endpoint"]["trafficSplit"] == {"12": 100}
    # The baseline's lookups after the move read what the move would have made.
    assert any(c["method"] == "MetadataService.ListArtifacts" and c["sent"] for c in printed)


def test_serving_rollback_vertex_without_a_registry_names_the_field(capsys):
    argv = ["serving", "rollback", "--vertex", "--dry-run", "--config", "kubeflow/vertex-cpu.yaml"]
    assert main(argv) == 2
    assert "vertex.model_registry" in capsys.readouterr().err


def test_the_pusher_never_deploys_a_rolled_back_version_again(tmp_path):
    from tests.serving_ops.vertex.test_pusher import register, saved_model_dir

    server = VertexServer()
    model_dir = saved_model_dir(tmp_path, 1)
    register(model_dir, server)
    (registered,) = server.versions(server.entry_named("digits-cnn")).values()
    registered.labels[ROLLED_BACK_LABEL] = "1"

    again = register(model_dir, server, endpoint_display_name="digits")

    assert not again.newly_registered
    assert len([s for s in server.sent if s.method == "UploadModel"]) == 1
    assert server.endpoints == {}


def test_rollback_is_refused_while_a_pin_stands():
    versions = [version("1"), version("2", "default", PINNED_ALIAS)]
    with pytest.raises(RegistryActionError, match=r"pinned to version 2; .*serving unpin --vertex"):
        registry_change("rollback", MODEL, versions, reason="bad", now=NOW)


def test_pin_sets_newer_versions_aside_then_gives_the_version_default_and_pinned():
    versions = [
        version("1"),
        version("2"),
        version("3", **{FINGERPRINT_LABEL: "c3"}),
        version("4", "default", **{FINGERPRINT_LABEL: "c4"}),
    ]

    change = registry_change("pin", MODEL, versions, "2", "known good", NOW)

    assert list(change.calls) == [
        "set_aside_4",
        "set_aside_3",
        "describe_pin",
        "move_default_and_pinned_aliases",
    ]
    aside = change.calls["set_aside_4"].request
    assert dict(aside.model.labels) == {FINGERPRINT_LABEL: "c4", ROLLED_BACK_LABEL: "1796133600"}
    assert "pinned to 2: known good" in aside.model.version_description
    described = change.calls["describe_pin"].request
    assert described.model.name == f"{MODEL}@2"
    assert list(described.update_mask.paths) == ["version_description"]  # labels untouched
    assert described.model.version_description.endswith(": known good")
    move = change.calls["move_default_and_pinned_aliases"].request
    assert (move.name, list(move.version_aliases)) == (f"{MODEL}@2", ["default", PINNED_ALIAS])
    assert change.serving == "2"


def test_pin_restores_a_rolled_back_version_and_names_what_it_cannot_pin():
    versions = [version("1", "default"), version("2", **{ROLLED_BACK_LABEL: "9", "a": "b"})]
    change = registry_change("pin", MODEL, versions, "2", "it was fine", NOW)
    restored = change.calls["remove_rolled_back_label"].request
    assert dict(restored.model.labels) == {"a": "b"}
    assert list(restored.update_mask.paths) == ["labels", "version_description"]

    with pytest.raises(RegistryActionError, match=rf"^{MODEL}: no version 7; "):
        registry_change("pin", MODEL, versions, "7", "typo", NOW)
    pinned = [version("1", PINNED_ALIAS), version("2", "default")]
    with pytest.raises(RegistryActionError, match="serving is pinned to version 1"):
        registry_change("pin", MODEL, pinned, "2", "other", NOW)
    again = registry_change("pin", MODEL, pinned, "1", "same, new reason", NOW)
    assert again.calls["move_default_and_pinned_aliases"].request.name == f"{MODEL}@1"


def test_unpin_removes_only_the_pinned_alias():
    versions = [version("1", "default", PINNED_ALIAS), version("2", **{ROLLED_BACK_LABEL: "9"})]
    change = registry_change("unpin", MODEL, versions)
    (remove,) = change.calls.values()
    assert remove.method == "ModelService.MergeVersionAliases"
    assert (remove.request.name, list(remove.request.version_aliases)) == (
        f"{MODEL}@1",
        [f"-{PINNED_ALIAS}"],
    )
    assert change.serving is None  # what serves does not change

    assert registry_change("unpin", MODEL, [version("1", "default")]).calls == {}


def test_restore_removes_the_label_and_serves_the_version_only_when_newer_than_the_served():
    versions = [
        version("1", **{ROLLED_BACK_LABEL: "9"}),
        version("2", "default"),
        version("3", **{ROLLED_BACK_LABEL: "9", FINGERPRINT_LABEL: "c3"}),
    ]
    older = registry_change("restore", MODEL, versions, "1", now=NOW)
    assert list(older.calls) == ["remove_rolled_back_label"] and older.serving is None
    newer = registry_change("restore", MODEL, versions, "3", now=NOW)
    assert dict(newer.calls["remove_rolled_back_label"].request.model.labels) == {
        FINGERPRINT_LABEL: "c3"
    }
    assert newer.calls["move_default_alias"].request.name == f"{MODEL}@3"
    assert newer.serving == "3"

    with pytest.raises(RegistryActionError, match=rf"^{MODEL}: version 2 is not rolled back; "):
        registry_change("restore", MODEL, versions, "2", now=NOW)
    versions[1].version_aliases.append(PINNED_ALIAS)
    with pytest.raises(RegistryActionError, match="serving is pinned to version 2"):
        registry_change("restore", MODEL, versions, "3", now=NOW)


def test_serving_pin_vertex_moves_the_aliases_then_all_traffic_to_the_pinned_version(
    monkeypatch, capsys
):
    server = VertexServer()
    server.entry((), ("default",), metadata=False)
    server.endpoint(("11", "1"), ("12", "2"))

    assert serving(monkeypatch, server, "pin", "1", "--reason", "known good") == 0

    writes = server.changes()
    assert [w.method for w in writes] == [
        "UpdateModel",  # the intent labels on version 1
        "UpdateModel",  # version 2 set aside
        "UpdateModel",  # the pin's note on version 1
        "MergeVersionAliases",
        "UpdateEndpoint",  # 2 had the traffic: kept deployed, nothing undeployed
        "UpdateModel",  # the intent labels removed
    ]
    assert [w.request.model.name for w in writes if w.method == "UpdateModel"] == [
        f"{MODEL}@1",
        f"{MODEL}@2",
        f"{MODEL}@1",
        f"{MODEL}@1",
    ]
    assert server.blind_writes == []  # every label write carried the etag it read
    sent = [s.method for s in server.sent]
    looked_up = [i for i, method in enumerate(sent) if method == "ListArtifacts"]
    assert len(looked_up) == 2  # the baseline follows: the PushedModels of versions 1 and 2
    assert sent.index("MergeVersionAliases") < looked_up[0] < sent.index("UpdateEndpoint")
    split = next(w for w in writes if w.method == "UpdateEndpoint").request
    assert dict(split.endpoint.traffic_split) == {"11": 100}  # 0 to the others, still deployed
    assert list(split.update_mask.paths) == ["traffic_split"]
    assert {INTENT_LABEL, OWNER_LABEL, LEASE_LABEL}.isdisjoint(server.version("1").labels)
    printed = capsys.readouterr().out
    assert f"pinned {MODEL}@1; set aside 2" in printed and "all traffic to" in printed


def test_serving_rollback_vertex_deploys_the_previous_version_when_the_endpoint_lacks_it(
    monkeypatch,
):
    server = VertexServer()
    server.entry((), ("default",), metadata=False)
    server.endpoint(("12", "2"))

    assert serving(monkeypatch, server, "rollback", "--reason", "bad") == 0

    deploy = server.request("DeployModel")
    assert deploy.deployed_model.model == f"{MODEL}@1"
    assert deploy.deployed_model.dedicated_resources.machine_spec.machine_type == ("n1-standard-2")
    assert dict(deploy.traffic_split) == {"0": 100}  # "0": the model being deployed


def test_serving_restore_vertex_of_a_version_not_rolled_back_is_one_line_and_sends_nothing(
    monkeypatch, capsys
):
    server = VertexServer()
    server.entry((), ("default",), metadata=False)

    assert serving(monkeypatch, server, "restore", "1") == 1

    err = capsys.readouterr().err
    assert err == (
        f"tpu-pipeline: {MODEL}: version 1 is not rolled back; "
        "`tpu-pipeline serving list --vertex` shows which are\n"
    )
    assert server.changes() == []


def test_serving_list_vertex_says_why_a_version_is_pinned_or_rolled_back(monkeypatch, capsys):
    server = VertexServer()
    server.entry(("default", PINNED_ALIAS), (), v2={ROLLED_BACK_LABEL: "9"}, metadata=False)
    server.version("1").version_description = "pinned by ops@host: known good"
    server.version("2").version_description = "rolled back by ops@host: pinned to 1: known good"

    assert serving(monkeypatch, server, "list") == 0

    assert capsys.readouterr().out.splitlines() == [
        "1  default, pinned, pinned by ops@host: known good",
        "2  rolled back by ops@host: pinned to 1: known good",
    ]


def test_serving_pin_and_restore_vertex_dry_runs_show_what_the_real_actions_send(
    monkeypatch, capsys
):
    server = VertexServer()
    server.entry((), ("default",), (), (), v3={ROLLED_BACK_LABEL: "9", "a": "b"})
    server.endpoint(("12", "2"))

    pin = changes(dry_run(monkeypatch, capsys, server, "pin", "3", "--reason", "good"))

    assert server.changes() == []
    updates = [c for c in pin if c["method"] == "ModelService.UpdateModel"]
    aside = next(c for c in updates if c["request"]["model"]["name"] == f"{MODEL}@4")
    assert ROLLED_BACK_LABEL in labels_written(aside)  # the newer version set aside
    back = next(
        c
        for c in updates
        if c["request"]["model"]["name"] == f"{MODEL}@3"
        and c["request"]["model"].get("versionDescription", "").startswith("restored")
    )
    assert ROLLED_BACK_LABEL not in labels_written(back)  # 3 comes back first
    assert labels_written(back)["a"] == "b"
    aliases = next(c for c in pin if c["method"] == "ModelService.MergeVersionAliases")
    assert aliases["request"] == {"name": f"{MODEL}@3", "versionAliases": ["default", "pinned"]}
    deploy = next(c for c in pin if c["method"] == "EndpointService.DeployModel")
    assert deploy["request"]["deployedModel"]["model"] == f"{MODEL}@3"

    gpu = "kubeflow/vertex-gpu.yaml"  # no endpoint
    restore = changes(dry_run(monkeypatch, capsys, server, "restore", "3", config=gpu))
    assert [c["method"].split(".")[1] for c in restore] == [
        "UpdateModel",  # the intent
        "UpdateModel",  # the rolled-back label removed, "restored" in the description
        "MergeVersionAliases",  # 3 is newer than the served 2: it serves
        "UpdateModel",  # the intent removed
    ]
    assert ROLLED_BACK_LABEL not in labels_written(restore[1])
    assert restore[2]["request"] == {"name": f"{MODEL}@3", "versionAliases": ["default"]}

    assert changes(dry_run(monkeypatch, capsys, server, "unpin")) == []  # nothing pinned
    server.version("2").version_aliases.append(PINNED_ALIAS)
    unpin = changes(dry_run(monkeypatch, capsys, server, "unpin"))
    assert [(c["method"], c["request"]) for c in unpin] == [
        (
            "ModelService.MergeVersionAliases",
            {"name": f"{MODEL}@2", "versionAliases": [f"-{PINNED_ALIAS}"]},
        )
    ]
    assert server.changes() == []


def test_a_traffic_move_keeps_the_served_and_the_previous_version_and_undeploys_older_ones(
    monkeypatch, capsys
):
    server = VertexServer()
    server.entry((), (), (), ("default",), metadata=False)
    on_endpoint = server.endpoint(("11", "1"), ("12", "2"), ("13", "3"), ("14", "4"))  # 14 serves

    assert serving(monkeypatch, server, "pin", "2", "--reason", "known good") == 0

    undeploys = [w.request for w in server.changes() if w.method == "UndeployModel"]
    assert [(u.endpoint, u.deployed_model_id) for u in undeploys] == [
        (on_endpoint.name, "11"),
        (on_endpoint.name, "13"),
    ]  # 2 serves (and is pinned); 4 served before it: a rollback is one traffic change
    methods = [w.method for w in server.changes()]
    assert methods.index("UpdateEndpoint") < methods.index(
        "UndeployModel"
    )  # the traffic leaves a version before it is undeployed
    printed = capsys.readouterr().out.splitlines()
    assert f"undeployed {MODEL}@1 from {on_endpoint.name}" in printed
    assert f"undeployed {MODEL}@3 from {on_endpoint.name}" in printed
