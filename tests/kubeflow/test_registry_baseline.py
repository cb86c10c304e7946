"""On Vertex, rollback, pin and restore make Vertex ML Metadata's blessings follow the registry.

The store is a stand-in for MetadataService that answers with aiplatform_v1 types as the
API does: each registry version was pushed by a Pusher execution whose inputs are a Model
and a ModelBlessing and whose output is a PushedModel. The registry side is stateful too
(labels and aliases move), so one action can follow another through `cli.main`.
"""

from __future__ import annotations

import json

import pytest
from google.api_core import exceptions

from cli.main import main
from kubeflow import registry_baseline
from kubeflow import vertex_types as gca
from kubeflow.model_registry import ROLLED_BACK_LABEL
from kubeflow.registry_actions import HALF_DONE, INTENT_LABEL
from kubeflow.registry_baseline import (
    BLESSED_BEFORE_KEY,
    WITHDRAWN_BY_KEY,
    blessing_call,
    pushed_blessings,
)
from tests.kubeflow.test_model_aliases import MODEL, FakeVertexApi

STORE = "projects/p/locations/us-central1/metadataStores/default"
SERVING = "gs://b/serving/digits"


def artifact(name: str, schema_title: str, **metadata) -> gca.Artifact:
    return gca.Artifact(
        name=f"{STORE}/artifacts/{name}", schema_title=schema_title, metadata=metadata
    )


def event(artifact_: gca.Artifact, execution: str, kind: gca.Event.Type) -> gca.Event:
    return gca.Event(
        artifact=artifact_.name, execution=f"{STORE}/executions/{execution}", type_=kind
    )


class FakeMetadataVertexApi(FakeVertexApi):
    """The registry of FakeVertexApi, whose labels and aliases move, plus MetadataService."""

    def __init__(self, versions: list[gca.Model]):
        super().__init__(versions, [])
        self.versions = {v.version_id: v for v in versions}
        self.artifacts: dict[str, gca.Artifact] = {}
        self.pushed: dict[str, gca.Artifact] = {}  # by pushed_destination
        self.graphs: dict[str, gca.LineageSubgraph] = {}
        self.fail_updates = False
        for version_id in self.versions:
            self.push(version_id, blessed=1)

    def push(self, version_id: str, blessed: int) -> None:
        """What a run's Trainer, Evaluator and Pusher record for one registry version."""
        destination = self.versions[version_id].artifact_uri
        model = artifact(f"model-{version_id}", "tfx.Model")
        blessing = artifact(
            f"blessing-{version_id}",
            "tfx.ModelBlessing",
            blessed=blessed,
            current_model_id=model.name,
        )
        baseline_blessing = artifact(f"evaluator-output-{version_id}", "tfx.ModelBlessing")
        pushed = artifact(f"pushed-{version_id}", "tfx.PushedModel", pushed_destination=destination)
        pusher, evaluator = f"pusher-{version_id}", f"evaluator-{version_id}"
        self.graphs[pushed.name] = gca.LineageSubgraph(
            artifacts=[model, blessing, pushed, baseline_blessing],
            events=[
                event(model, pusher, gca.Event.Type.INPUT),
                event(blessing, pusher, gca.Event.Type.INPUT),
                event(pushed, pusher, gca.Event.Type.OUTPUT),
                event(model, evaluator, gca.Event.Type.INPUT),
                event(baseline_blessing, evaluator, gca.Event.Type.OUTPUT),  # not the Pusher's
            ],
        )
        self.artifacts.update({a.name: a for a in (model, blessing, pushed, baseline_blessing)})
        self.pushed[destination] = pushed

    def blessing(self, version_id: str) -> dict:
        return dict(self.artifacts[f"{STORE}/artifacts/blessing-{version_id}"].metadata)

    def send(self, call, region, credentials):
        self.sent.append(call)
        request = call.request
        if call.method == "ModelService.ListModelVersions":
            return list(self.versions.values())
        if call.method == "ModelService.UpdateModel" and "labels" in request.update_mask.paths:
            self.versions[request.model.name.split("@")[1]].labels = dict(request.model.labels)
        if call.method == "ModelService.MergeVersionAliases":
            self._merge_aliases(request.name.split("@")[1], list(request.version_aliases))
        if call.method == "MetadataService.ListArtifacts":
            destination = request.filter.split('string_value="')[1].rstrip('"')
            assert request.filter.startswith('schema_title="tfx.PushedModel" AND ')
            return [self.pushed[destination]] if destination in self.pushed else []
        if call.method == "MetadataService.QueryArtifactLineageSubgraph":
            assert request.max_hops == 2
            graph = gca.LineageSubgraph(self.graphs[request.artifact])
            graph.artifacts = [self.artifacts[a.name] for a in graph.artifacts]  # as updated
            return graph
        if call.method == "MetadataService.UpdateArtifact":
            if self.fail_updates:
                raise exceptions.ServiceUnavailable("metadata store unavailable")
            assert list(request.update_mask.paths) == ["metadata"]
            self.artifacts[request.artifact.name].metadata = dict(request.artifact.metadata)
        return self.answers.get(call.method)

    def _merge_aliases(self, version_id: str, aliases: list[str]) -> None:
        """An alias names one version: giving it to one takes it from the others."""
        for alias in aliases:
            bare = alias.lstrip("-")
            for other in self.versions.values():
                other.version_aliases = [a for a in other.version_aliases if a != bare]
            if not alias.startswith("-"):
                self.versions[version_id].version_aliases.append(alias)

    def updates(self) -> list[str]:
        """The artifacts UpdateArtifact was sent for, in order."""
        return [
            call.request.artifact.name.rsplit("/", 1)[1]
            for call in self.sent
            if call.method == "MetadataService.UpdateArtifact"
        ]


def registry(*aliases_by_version: tuple[str, ...], **labels_by_version: dict) -> list[gca.Model]:
    return [
        gca.Model(
            name=MODEL,
            version_id=str(i),
            version_aliases=list(aliases),
            artifact_uri=f"{SERVING}/{1000 + i}",
            labels=labels_by_version.get(f"v{i}", {}),
        )
        for i, aliases in enumerate(aliases_by_version, start=1)
    ]


def serving(monkeypatch, api: FakeMetadataVertexApi, *argv: str) -> int:
    from kubeflow import vertex_api

    monkeypatch.setattr(vertex_api, "connect", lambda region: "credentials")
    monkeypatch.setattr(vertex_api, "send", api.send)
    return main(["serving", *argv, "--vertex", "--config", "kubeflow/vertex-gpu.yaml"])


def test_withdrawing_keeps_the_verdict_and_reinstating_puts_it_back():
    blessing = artifact("b", "tfx.ModelBlessing", blessed=1, current_model_id="m")

    withdraw = blessing_call(blessing, f"{MODEL}@3")
    withdrawn = withdraw.request.artifact
    assert dict(withdrawn.metadata) == {
        "blessed": 0,  # the resolver's `metadata.blessed.number_value=1` no longer matches
        "current_model_id": "m",
        BLESSED_BEFORE_KEY: 1,
        WITHDRAWN_BY_KEY: f"{MODEL}@3",
    }
    assert blessing_call(withdrawn, f"{MODEL}@3") is None  # agrees already: nothing to send
    reinstated = blessing_call(withdrawn, None).request.artifact
    assert (reinstated.metadata["blessed"], reinstated.metadata[WITHDRAWN_BY_KEY]) == (1, "")
    assert blessing_call(reinstated, None) is None

    refused = artifact("r", "tfx.ModelBlessing", blessed=0)
    back = blessing_call(blessing_call(refused, "v").request.artifact, None).request.artifact
    assert back.metadata["blessed"] == 0  # a refusal stays a refusal


def test_the_blessing_of_a_version_is_the_one_its_pusher_took():
    api = FakeMetadataVertexApi(registry(("default",)))
    pushed = api.pushed[f"{SERVING}/1001"]

    found = pushed_blessings(api.graphs[pushed.name], pushed.name)

    assert [b.name.rsplit("/", 1)[1] for b in found] == ["blessing-1"]


def test_a_manual_blessing_is_found_as_an_output_beside_its_pushed_model():
    model = artifact("model-7", "tfx.Model")
    blessing = artifact("manual", "tfx.ModelBlessing", blessed=1)
    pushed = artifact("pushed-manual", "tfx.PushedModel")
    other = artifact("other", "tfx.ModelBlessing", blessed=1)  # another execution's output
    graph = gca.LineageSubgraph(
        artifacts=[model, blessing, pushed, other],
        events=[
            event(model, "manual", gca.Event.Type.INPUT),
            event(blessing, "manual", gca.Event.Type.OUTPUT),
            event(pushed, "manual", gca.Event.Type.OUTPUT),
            event(model, "evaluator", gca.Event.Type.INPUT),
            event(other, "evaluator", gca.Event.Type.OUTPUT),
        ],
    )

    assert [b.name for b in pushed_blessings(graph, pushed.name)] == [blessing.name]


def test_requests_parse_as_aiplatform_v1_types_and_the_dry_run_prints_them(capsys):
    for call in registry_baseline.planned_baseline_calls(STORE).values():
        request_type = type(call.request)
        assert request_type.from_json(request_type.to_json(call.request)) == call.request

    argv = ["serving", "rollback", "--vertex", "--dry-run", "--config", "kubeflow/vertex-gpu.yaml"]
    assert main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    lookup = printed["baseline_pushed_lookup"]
    assert lookup["method"] == "MetadataService.ListArtifacts"
    assert lookup["request"]["parent"].endswith("/metadataStores/default")
    assert printed["if_rolled_back_withdraw_blessing"]["request"]["updateMask"] == "metadata"


def test_rollback_moves_default_then_withdraws_only_the_rolled_back_versions_blessing(
    monkeypatch, capsys
):
    api = FakeMetadataVertexApi(registry((), (), ("default",)))

    assert serving(monkeypatch, api, "rollback", "--reason", "bad") == 0

    assert api.updates() == ["blessing-3"]
    assert api.blessing("3")[WITHDRAWN_BY_KEY] == f"{MODEL}@3"
    assert api.blessing("3")["blessed"] == 0
    assert api.blessing("2")["blessed"] == 1  # what serves now is the next run's baseline
    methods = [call.method for call in api.sent]
    assert methods.index("ModelService.MergeVersionAliases") < methods.index(
        "MetadataService.UpdateArtifact"
    )  # as locally: the serving side first, then the baseline, under the intent
    assert "baseline: withdrawn 1 blessing(s) in Vertex ML Metadata" in capsys.readouterr().out

    assert serving(monkeypatch, api, "restore", "3") == 0

    assert api.updates() == ["blessing-3", "blessing-3"]
    assert (api.blessing("3")["blessed"], api.blessing("3")[WITHDRAWN_BY_KEY]) == (1, "")
    assert "default" in api.versions["3"].version_aliases


def test_pin_withdraws_the_newer_blessings_and_a_second_pin_changes_nothing(monkeypatch):
    api = FakeMetadataVertexApi(registry((), (), ("default",)))

    assert serving(monkeypatch, api, "pin", "1", "--reason", "known good") == 0
    assert sorted(api.updates()) == ["blessing-2", "blessing-3"]
    assert api.blessing("1")["blessed"] == 1

    assert serving(monkeypatch, api, "pin", "1", "--reason", "known good") == 0
    assert sorted(api.updates()) == ["blessing-2", "blessing-3"]  # nothing more


def test_a_version_rolled_back_earlier_gets_its_blessing_withdrawn_by_a_later_action(
    monkeypatch,
):
    # Rolled back before the metadata followed the registry: the next action makes it agree.
    api = FakeMetadataVertexApi(registry((), ("default",), (), v3={ROLLED_BACK_LABEL: "1"}))

    assert serving(monkeypatch, api, "pin", "2") == 0

    assert api.updates() == ["blessing-3"]
    assert api.blessing("3")[WITHDRAWN_BY_KEY] == f"{MODEL}@3"


def test_a_metadata_failure_after_the_registry_moved_is_finished_by_the_next_command(
    monkeypatch, capsys
):
    api = FakeMetadataVertexApi(registry((), ("default",)))
    api.fail_updates = True  # the store fails between the registry step and its own

    assert serving(monkeypatch, api, "rollback", "--reason", "bad") == 1

    err = capsys.readouterr().err
    assert err.startswith(f"tpu-pipeline: {MODEL}@2: Vertex ML Metadata did not follow (")
    assert err.count("\n") == 1 and err.endswith(f"; {HALF_DONE}\n")
    assert "default" in api.versions["1"].version_aliases  # the registry moved
    assert api.versions["2"].labels[INTENT_LABEL].startswith("rollback-1-")
    assert api.blessing("2")["blessed"] == 1  # the baseline did not follow yet

    api.fail_updates = False
    before = len(api.sent)
    assert serving(monkeypatch, api, "unpin") == 0  # any next command finishes it

    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{MODEL}@2: the rollback of ") and out[0].endswith(
        " was left half done; finishing it"
    )
    assert f"finished the rollback of {MODEL}@2; serving 1 (default)" in out
    assert api.blessing("2")[WITHDRAWN_BY_KEY] == f"{MODEL}@2"
    assert INTENT_LABEL not in api.versions["2"].labels
    assert "default" in api.versions["1"].version_aliases
    finishing = [c.method for c in api.sent[before:]]
    assert "ModelService.MergeVersionAliases" not in finishing  # done already: not sent again


def test_a_process_killed_between_the_registry_and_the_metadata_leaves_an_intent_finished_next(
    monkeypatch, capsys
):
    api = FakeMetadataVertexApi(registry((), (), ("default",)))
    send = api.send

    def killed_at_the_metadata(call, region, credentials):  # as kill -9 there would
        if call.method.startswith("MetadataService"):
            raise KeyboardInterrupt
        return send(call, region, credentials)

    api.send = killed_at_the_metadata
    with pytest.raises(KeyboardInterrupt):
        serving(monkeypatch, api, "pin", "1", "--reason", "known good")
    assert api.versions["1"].labels[INTENT_LABEL].startswith("pin-self-")
    assert "pinned" in api.versions["1"].version_aliases

    api.send = send
    assert serving(monkeypatch, api, "list") == 0

    assert sorted(api.updates()) == ["blessing-2", "blessing-3"]
    assert INTENT_LABEL not in api.versions["1"].labels
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{MODEL}@1: the pin of ") and out[-3:] == [
        "1  default, pinned, " + api.versions["1"].version_description,
        "2  " + api.versions["2"].version_description,
        "3  " + api.versions["3"].version_description,
    ]


@pytest.mark.parametrize("action", ["unpin", "list"])
def test_actions_that_set_nothing_aside_leave_the_metadata_alone(monkeypatch, action):
    api = FakeMetadataVertexApi(registry(("default",)))
    assert serving(monkeypatch, api, action) == 0
    assert not [c for c in api.sent if c.method.startswith("MetadataService")]
