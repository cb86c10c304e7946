"""On Vertex, rollback, pin and restore make Vertex ML Metadata's blessings follow the registry.

The store is `server.VertexServer`'s MetadataService, which answers with aiplatform_v1
types as the API does: each registry version was pushed by a Pusher execution whose
inputs are a Model and a ModelBlessing and whose output is a PushedModel. The registry
side is stateful too (labels and aliases move), so one action can follow another
through `tpu_pipeline.cli.main`.
"""

from __future__ import annotations

import pytest
from google.api_core import exceptions

from tests.serving_ops.vertex.server import MODEL, SERVING, STORE, VertexServer
from tests.serving_ops.vertex.server import serving as serving_vertex
from tpu_pipeline.common import vertex_types as gca
from tpu_pipeline.serving_ops.vertex import baseline as registry_baseline
from tpu_pipeline.serving_ops.vertex.actions import HALF_DONE, INTENT_LABEL
from tpu_pipeline.serving_ops.vertex.baseline import (
    BLESSED_BEFORE_KEY,
    WITHDRAWN_BY_KEY,
    blessing_call,
    pushed_blessings,
)
from tpu_pipeline.serving_ops.vertex.intents import LEASE_SECONDS
from tpu_pipeline.serving_ops.vertex.pusher import ROLLED_BACK_LABEL


def artifact(name: str, schema_title: str, **metadata) -> gca.Artifact:
    return gca.Artifact(
        name=f"{STORE}/artifacts/{name}", schema_title=schema_title, metadata=metadata
    )


def event(artifact_: gca.Artifact, execution: str, kind: gca.Event.Type) -> gca.Event:
    return gca.Event(
        artifact=artifact_.name, execution=f"{STORE}/executions/{execution}", type_=kind
    )


def serving(monkeypatch, server: VertexServer, *argv: str) -> int:
    return serving_vertex(monkeypatch, server, *argv, config="kubeflow/vertex-gpu.yaml")


def lineage(server: VertexServer, pushed_name: str) -> gca.LineageSubgraph:
    request = gca.QueryArtifactLineageSubgraphRequest(artifact=pushed_name, max_hops=2)
    return server._query_artifact_lineage_subgraph(request)


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
    server = VertexServer()
    server.entry(("default",))
    pushed = f"{STORE}/artifacts/pushed-1"
    assert server.artifacts[pushed].metadata["pushed_destination"] == f"{SERVING}/1001"

    found = pushed_blessings(lineage(server, pushed), pushed)

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


def test_requests_parse_as_aiplatform_v1_types_and_the_dry_run_prints_them(monkeypatch, capsys):
    blessing = artifact("b", "tfx.ModelBlessing", blessed=1)
    for call in (
        registry_baseline.pushed_models_call(STORE, f"{SERVING}/1001"),
        registry_baseline.lineage_call(blessing.name),
        blessing_call(blessing, f"{MODEL}@2"),
    ):
        request_type = type(call.request)
        assert request_type.from_json(request_type.to_json(call.request)) == call.request

    import json

    server = VertexServer()
    server.entry((), ("default",))
    assert serving(monkeypatch, server, "rollback", "--dry-run") == 0
    printed = json.loads(capsys.readouterr().out)
    lookup = next(c for c in printed if c["method"] == "MetadataService.ListArtifacts")
    assert lookup["sent"] and lookup["request"]["parent"].endswith("/metadataStores/default")
    withdraw = next(c for c in printed if c["method"] == "MetadataService.UpdateArtifact")
    assert not withdraw["sent"] and withdraw["request"]["updateMask"] == "metadata"
    assert withdraw["request"]["artifact"]["etag"]  # conditional on the blessing as read
    assert server.blessing("2")["blessed"] == 1  # the dry run changed nothing


def test_rollback_moves_default_then_withdraws_only_the_rolled_back_versions_blessing(
    monkeypatch, capsys
):
    server = VertexServer()
    server.entry((), (), ("default",))

    assert serving(monkeypatch, server, "rollback", "--reason", "bad") == 0

    assert server.updates() == ["blessing-3"]
    assert server.blessing("3")[WITHDRAWN_BY_KEY] == f"{MODEL}@3"
    assert server.blessing("3")["blessed"] == 0
    assert server.blessing("2")["blessed"] == 1  # what serves now is the next run's baseline
    methods = [sent.method for sent in server.sent]
    assert methods.index("MergeVersionAliases") < methods.index(
        "UpdateArtifact"
    )  # as locally: the serving side first, then the baseline, under the intent
    assert "baseline: withdrawn 1 blessing(s) in Vertex ML Metadata" in capsys.readouterr().out

    assert serving(monkeypatch, server, "restore", "3") == 0

    assert server.updates() == ["blessing-3", "blessing-3"]
    assert (server.blessing("3")["blessed"], server.blessing("3")[WITHDRAWN_BY_KEY]) == (1, "")
    assert "default" in server.version("3").version_aliases


def test_pin_withdraws_the_newer_blessings_and_a_second_pin_changes_nothing(monkeypatch):
    server = VertexServer()
    server.entry((), (), ("default",))

    assert serving(monkeypatch, server, "pin", "1", "--reason", "known good") == 0
    assert sorted(server.updates()) == ["blessing-2", "blessing-3"]
    assert server.blessing("1")["blessed"] == 1

    assert serving(monkeypatch, server, "pin", "1", "--reason", "known good") == 0
    assert sorted(server.updates()) == ["blessing-2", "blessing-3"]  # nothing more


def test_a_version_rolled_back_earlier_gets_its_blessing_withdrawn_by_a_later_action(
    monkeypatch,
):
    # Rolled back before the metadata followed the registry: the next action makes it agree.
    server = VertexServer()
    server.entry((), ("default",), (), v3={ROLLED_BACK_LABEL: "1"})

    assert serving(monkeypatch, server, "pin", "2") == 0

    assert server.updates() == ["blessing-3"]
    assert server.blessing("3")[WITHDRAWN_BY_KEY] == f"{MODEL}@3"


def test_a_metadata_failure_after_the_registry_moved_is_finished_by_the_next_command(
    monkeypatch, capsys
):
    server = VertexServer()
    server.entry((), ("default",))
    # The store fails between the registry step and its own.
    server.fail("UpdateArtifact", exceptions.ServiceUnavailable("metadata store unavailable"), -1)

    assert serving(monkeypatch, server, "rollback", "--reason", "bad") == 1

    err = capsys.readouterr().err
    assert err.startswith(f"tpu-pipeline: {MODEL}@2: Vertex ML Metadata did not follow (")
    assert err.count("\n") == 1 and err.endswith(f"; {HALF_DONE}\n")
    assert "default" in server.version("1").version_aliases  # the registry moved
    assert server.version("2").labels[INTENT_LABEL].startswith("rollback-1-")
    assert server.blessing("2")["blessed"] == 1  # the baseline did not follow yet

    server.failures.clear()
    before = len(server.sent)
    assert serving(monkeypatch, server, "unpin") == 0  # any next command finishes it at once

    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{MODEL}@2: the rollback of ") and out[0].endswith(
        " was left half done; finishing it"
    )
    assert f"finished the rollback of {MODEL}@2; serving 1 (default)" in out
    assert server.blessing("2")[WITHDRAWN_BY_KEY] == f"{MODEL}@2"
    assert INTENT_LABEL not in server.version("2").labels
    assert "default" in server.version("1").version_aliases
    finishing = [sent.method for sent in server.sent[before:]]
    assert "MergeVersionAliases" not in finishing  # done already: not sent again


class Killed(BaseException):
    """What kill -9 does to a process, as far as the registry can tell: it stops, mid-call."""


def test_a_process_killed_between_the_registry_and_the_metadata_leaves_an_intent_finished_next(
    monkeypatch, capsys
):
    server = VertexServer()
    server.entry((), (), ("default",))

    def killed_at_the_metadata(sent):
        if sent.method.startswith(("ListArtifacts", "UpdateArtifact")):
            raise Killed

    server.hooks.append(killed_at_the_metadata)
    with pytest.raises(Killed):
        serving(monkeypatch, server, "pin", "1", "--reason", "known good")
    server.hooks.clear()
    assert server.version("1").labels[INTENT_LABEL].startswith("pin-self-")
    assert "pinned" in server.version("1").version_aliases

    # Its lease is live: whoever lists leaves it to its owner, and says so.
    assert serving(monkeypatch, server, "list") == 0
    assert server.updates() == [] and INTENT_LABEL in server.version("1").labels
    assert "pin by " in capsys.readouterr().out

    server.now += LEASE_SECONDS  # the owner is gone for good: its lease runs out
    assert serving(monkeypatch, server, "list") == 0

    assert sorted(server.updates()) == ["blessing-2", "blessing-3"]
    assert INTENT_LABEL not in server.version("1").labels
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{MODEL}@1: the pin of ") and out[-3:] == [
        "1  default, pinned, " + server.version("1").version_description,
        "2  " + server.version("2").version_description,
        "3  " + server.version("3").version_description,
    ]


@pytest.mark.parametrize("action", ["unpin", "list"])
def test_actions_that_set_nothing_aside_leave_the_metadata_alone(monkeypatch, action):
    server = VertexServer()
    server.entry(("default",))
    assert serving(monkeypatch, server, action) == 0
    assert not [s for s in server.sent if s.call.method.startswith("MetadataService")]
