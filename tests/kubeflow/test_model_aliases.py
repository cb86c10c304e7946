"""Rollback, pin, unpin and restore on Vertex AI: registry aliases and labels, and the endpoint.

Requests are built offline from fake version lists (aiplatform_v1 types, as the
API returns them); the CLI is driven through `cli.main`, with `--dry-run` or
with a stand-in for `vertex_api.send` that answers the lookups.
"""

from __future__ import annotations

import datetime
import json
import types

import pytest

from cli.main import main
from kubeflow import model_aliases
from kubeflow import vertex_types as gca
from kubeflow.model_aliases import FOUND_MODEL, RegistryActionError, registry_change
from kubeflow.model_registry import FINGERPRINT_LABEL, PINNED_ALIAS, ROLLED_BACK_LABEL
from tests.kubeflow.test_model_registry import FakeVertex, register, saved_model_dir

MODEL = "projects/p/locations/us-central1/models/123"
NOW = datetime.datetime(2026, 12, 1, 14, 0, tzinfo=datetime.timezone.utc)


def version(version_id: str, *aliases: str, **labels: str) -> gca.Model:
    return gca.Model(
        name=MODEL, version_id=version_id, version_aliases=list(aliases), labels=labels
    )


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


def test_serving_rollback_vertex_dry_run_prints_the_lookup_and_both_requests(capsys):
    argv = ["serving", "rollback", "--vertex", "--dry-run", "--reason", "bad"]
    assert main([*argv, "--config", "kubeflow/vertex-tpu.yaml"]) == 0

    printed = json.loads(capsys.readouterr().out)
    assert list(printed) == [
        "lookup",
        "versions",
        "write_intent",  # first: what a later command finishes if this one stops
        "label_rolled_back",
        "move_default_alias",
        "baseline_pushed_lookup",  # the next run's baseline follows the registry
        "baseline_lineage",
        "if_rolled_back_withdraw_blessing",
        "if_back_reinstate_blessing",
        "endpoint_lookup",  # vertex-tpu.yaml names an endpoint: its traffic follows
        "if_deployed",
        "if_not_deployed",
        "undeploy_older",
        "clear_intent",
    ]
    assert printed["lookup"]["method"] == "ModelService.ListModels"
    assert printed["lookup"]["request"]["filter"] == 'display_name="tpu-pipeline-digits"'
    assert printed["versions"]["request"]["name"] == FOUND_MODEL
    assert printed["move_default_alias"]["request"]["versionAliases"] == ["default"]
    assert printed["move_default_alias"]["request"]["name"].endswith(model_aliases.FOUND_PREVIOUS)
    deployed = printed["if_not_deployed"]["request"]["deployedModel"]["model"]
    assert deployed == f"{FOUND_MODEL}@{model_aliases.FOUND_PREVIOUS}"


def test_serving_rollback_vertex_without_a_registry_names_the_field(capsys):
    argv = ["serving", "rollback", "--vertex", "--dry-run", "--config", "kubeflow/vertex-cpu.yaml"]
    assert main(argv) == 2
    assert "vertex.model_registry" in capsys.readouterr().err


def test_the_pusher_never_deploys_a_rolled_back_version_again(tmp_path):
    vertex = FakeVertex()
    model_dir = saved_model_dir(tmp_path, 1)
    register(model_dir, vertex)
    (registered,) = vertex.versions("digits-cnn")
    registered.labels[ROLLED_BACK_LABEL] = "1"

    again = register(model_dir, vertex, endpoint_display_name="digits")

    assert not again.newly_registered and len(vertex.uploads) == 1
    assert vertex.endpoints == []


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


class FakeVertexApi:
    """Stands in for `vertex_api.send`: answers the lookups, records every request."""

    def __init__(self, versions: list[gca.Model], endpoints: list[gca.Endpoint]):
        self.answers = {
            "ModelService.ListModels": [gca.Model(name=MODEL)],
            "ModelService.ListModelVersions": versions,
            "EndpointService.ListEndpoints": endpoints,
            "MetadataService.ListArtifacts": [],  # no PushedModel: no blessing to follow
        }
        self.sent: list = []

    def send(self, call, region, credentials):
        self.sent.append(call)
        return self.answers.get(call.method, types.SimpleNamespace())


def serving_vertex(monkeypatch, api: FakeVertexApi, *argv: str) -> int:
    from kubeflow import vertex_api

    monkeypatch.setattr(vertex_api, "connect", lambda region: "credentials")
    monkeypatch.setattr(vertex_api, "send", api.send)
    return main(["serving", *argv, "--vertex", "--config", "kubeflow/vertex-tpu.yaml"])


def endpoint(*deployed: tuple[str, str]) -> gca.Endpoint:
    """An endpoint with the deployed (deployed model id, version id) pairs."""
    return gca.Endpoint(
        name="projects/p/locations/us-central1/endpoints/9",
        display_name="tpu-pipeline-digits",
        deployed_models=[
            gca.DeployedModel(id=i, model=f"{MODEL}@{v}", model_version_id=v) for i, v in deployed
        ],
        traffic_split={deployed[-1][0]: 100} if deployed else {},
    )


def test_serving_pin_vertex_moves_the_aliases_then_all_traffic_to_the_pinned_version(
    monkeypatch, capsys
):
    versions = [version("1"), version("2", "default")]
    api = FakeVertexApi(versions, [endpoint(("11", "1"), ("12", "2"))])

    assert serving_vertex(monkeypatch, api, "pin", "1", "--reason", "known good") == 0

    assert [call.method.split(".")[1] for call in api.sent] == [
        "ListModels",
        "ListModelVersions",
        "UpdateModel",  # the intent label on version 1
        "UpdateModel",  # version 2 set aside
        "UpdateModel",  # the pin's note on version 1
        "MergeVersionAliases",
        "ListModelVersions",
        "ListArtifacts",  # the baseline follows: PushedModels of version 1
        "ListArtifacts",  # and of version 2
        "ListEndpoints",
        "UpdateEndpoint",  # 2 had the traffic: kept deployed, nothing undeployed
        "UpdateModel",  # the intent label removed
        "ListModelVersions",
    ]
    split = next(c for c in api.sent if c.method == "EndpointService.UpdateEndpoint").request
    assert dict(split.endpoint.traffic_split) == {"11": 100}  # 0 to the others, still deployed
    assert list(split.update_mask.paths) == ["traffic_split"]
    printed = capsys.readouterr().out
    assert f"pinned {MODEL}@1; set aside 2" in printed and "all traffic to" in printed


def test_serving_rollback_vertex_deploys_the_previous_version_when_the_endpoint_lacks_it(
    monkeypatch,
):
    versions = [version("1"), version("2", "default")]
    api = FakeVertexApi(versions, [endpoint(("12", "2"))])

    assert serving_vertex(monkeypatch, api, "rollback", "--reason", "bad") == 0

    deploy = next(c for c in api.sent if c.method.startswith("EndpointService.Deploy"))
    assert deploy.request.deployed_model.model == f"{MODEL}@1"
    assert deploy.request.deployed_model.dedicated_resources.machine_spec.machine_type == (
        "n1-standard-2"
    )
    assert dict(deploy.request.traffic_split) == {"0": 100}  # "0": the model being deployed


def test_serving_restore_vertex_of_a_version_not_rolled_back_is_one_line_and_sends_nothing(
    monkeypatch, capsys
):
    api = FakeVertexApi([version("1"), version("2", "default")], [])

    assert serving_vertex(monkeypatch, api, "restore", "1") == 1

    err = capsys.readouterr().err
    assert err == (
        f"tpu-pipeline: {MODEL}: version 1 is not rolled back; "
        "`tpu-pipeline serving list --vertex` shows which are\n"
    )
    assert [call.method for call in api.sent][-1] == "ModelService.ListModelVersions"


def test_serving_list_vertex_says_why_a_version_is_pinned_or_rolled_back(monkeypatch, capsys):
    versions = [
        gca.Model(
            version_id="1",
            version_aliases=["default", PINNED_ALIAS],
            version_description="pinned by ops@host: known good",
        ),
        gca.Model(
            version_id="2",
            labels={ROLLED_BACK_LABEL: "9"},
            version_description="rolled back by ops@host: pinned to 1: known good",
        ),
    ]
    assert serving_vertex(monkeypatch, FakeVertexApi(versions, []), "list") == 0
    assert capsys.readouterr().out.splitlines() == [
        "1  default, pinned, pinned by ops@host: known good",
        "2  rolled back by ops@host: pinned to 1: known good",
    ]


def test_serving_pin_and_restore_vertex_dry_run_print_every_request_they_may_send(capsys):
    def dry_run(*argv: str, config: str = "kubeflow/vertex-tpu.yaml") -> dict:
        assert main(["serving", *argv, "--vertex", "--dry-run", "--config", config]) == 0
        return json.loads(capsys.readouterr().out)

    pin = dry_run("pin", "3", "--reason", "good")
    assert list(pin)[2:] == [
        "write_intent",
        f"set_aside_{model_aliases.FOUND_NEWER}",
        "if_3_is_rolled_back",
        "describe_pin",
        "move_default_and_pinned_aliases",
        "baseline_pushed_lookup",
        "baseline_lineage",
        "if_rolled_back_withdraw_blessing",
        "if_back_reinstate_blessing",
        "endpoint_lookup",
        "if_deployed",
        "if_not_deployed",
        "undeploy_older",
        "clear_intent",
    ]
    assert pin["move_default_and_pinned_aliases"]["request"]["versionAliases"] == [
        "default",
        PINNED_ALIAS,
    ]
    assert pin["if_not_deployed"]["request"]["deployedModel"]["model"] == f"{FOUND_MODEL}@3"

    no_endpoint = dry_run("restore", "3", config="kubeflow/vertex-gpu.yaml")
    assert list(no_endpoint)[2:5] == [
        "write_intent",
        "remove_rolled_back_label",
        f"if_newer_than_{model_aliases.FOUND_DEFAULT}",
    ]
    assert list(no_endpoint)[-1] == "clear_intent"
    assert list(dry_run("unpin"))[2:] == ["remove_pinned_alias"]


def test_a_traffic_move_keeps_the_served_and_the_previous_version_and_undeploys_older_ones(
    monkeypatch, capsys
):
    versions = [version("1"), version("2"), version("3"), version("4", "default")]
    on_endpoint = endpoint(("11", "1"), ("12", "2"), ("13", "3"), ("14", "4"))  # 14 serves
    api = FakeVertexApi(versions, [on_endpoint])

    assert serving_vertex(monkeypatch, api, "pin", "2", "--reason", "known good") == 0

    undeploys = [c.request for c in api.sent if c.method == "EndpointService.UndeployModel"]
    assert [(u.endpoint, u.deployed_model_id) for u in undeploys] == [
        (on_endpoint.name, "11"),
        (on_endpoint.name, "13"),
    ]  # 2 serves (and is pinned); 4 served before it: a rollback is one traffic change
    methods = [c.method for c in api.sent]
    assert methods.index("EndpointService.UpdateEndpoint") < methods.index(
        "EndpointService.UndeployModel"
    )  # the traffic leaves a version before it is undeployed
    printed = capsys.readouterr().out.splitlines()
    assert f"undeployed {MODEL}@1 from {on_endpoint.name}" in printed
    assert f"undeployed {MODEL}@3 from {on_endpoint.name}" in printed
