"""`serving bless --vertex`: the refused model becomes the served registry version, marked."""

from __future__ import annotations

import json
import pathlib
import shutil
import tempfile

import pytest
from google.api_core import exceptions

from tests.serving_ops.vertex.server import CONTEXT, MODEL, STORE, VertexServer, serving
from tests.serving_ops.vertex.test_aliases import NOW, version
from tpu_pipeline.cli.main import main
from tpu_pipeline.common import vertex_types as gca
from tpu_pipeline.common.config import ModelRegistryConfig
from tpu_pipeline.serving_ops.vertex import actions as registry_actions
from tpu_pipeline.serving_ops.vertex import blessing as registry_blessing
from tpu_pipeline.serving_ops.vertex.aliases import RegistryActionError
from tpu_pipeline.serving_ops.vertex.blessing import BLESSED_LABEL, bless_change
from tpu_pipeline.serving_ops.vertex.intents import INTENT_LABEL
from tpu_pipeline.serving_ops.vertex.pusher import (
    FINGERPRINT_LABEL,
    PINNED_ALIAS,
    ROLLED_BACK_LABEL,
)

MODEL_ARTIFACT = f"{STORE}/artifacts/model-7"  # the Trainer's Model, found in the store
REGISTRY = ModelRegistryConfig(model_display_name="tpu-pipeline-digits")
LOCATION = "projects/p/locations/us-central1"
URI = "gs://my-bucket/root/Trainer/model/7/Format-Serving"


def bless(versions, fingerprint="f7"):
    return bless_change(REGISTRY, LOCATION, MODEL, versions, URI, fingerprint, "PO accepts", NOW)


def test_a_new_model_is_uploaded_as_the_default_version_marked_as_blessed_by_hand():
    change = bless([version("1", "default", **{FINGERPRINT_LABEL: "f1"})])

    (upload,) = change.calls.values()
    assert upload.method == "ModelService.UploadModel"
    request = upload.request
    assert (request.parent, request.parent_model) == (LOCATION, MODEL)
    assert request.model.artifact_uri == URI
    assert request.model.container_spec.image_uri == REGISTRY.serving_image
    assert list(request.model.version_aliases) == ["default"]
    assert dict(request.model.labels) == {FINGERPRINT_LABEL: "f7", BLESSED_LABEL: "1796133600"}
    assert request.model.version_description.startswith("blessed by hand 2026-12-01T14:00:00")
    assert request.model.version_description.endswith(": PO accepts")
    assert change.serving is None  # known once the upload is done

    first = bless_change(REGISTRY, LOCATION, None, [], URI, "f7", "first", NOW)
    assert first.calls["upload"].request.parent_model == ""  # the upload creates the entry


def test_a_registered_model_gets_the_note_and_default_and_a_rolled_back_one_is_refused():
    registered = bless([version("1", "default"), version("2", **{FINGERPRINT_LABEL: "f7"})])
    assert list(registered.calls) == ["describe_blessing", "move_default_alias"]
    labels = dict(registered.calls["describe_blessing"].request.model.labels)
    assert labels == {FINGERPRINT_LABEL: "f7", BLESSED_LABEL: "1796133600"}
    assert registered.serving == "2"

    rolled_back = [
        version("1", "default"),
        version("2", **{FINGERPRINT_LABEL: "f7", ROLLED_BACK_LABEL: "9"}),
    ]
    with pytest.raises(RegistryActionError, match=r"rolled back as .*@2; .*serving restore 2"):
        bless(rolled_back)
    with pytest.raises(RegistryActionError, match="serving is pinned to version 1"):
        bless([version("1", "default", PINNED_ALIAS)])


def test_model_uri_must_be_on_cloud_storage(tmp_path):
    with pytest.raises(RegistryActionError, match="give the gs:// URI"):
        registry_blessing.model_label(str(tmp_path))


def blessing_server(*aliases_by_version, **labels_by_version) -> VertexServer:
    """A registry entry with these versions, and a metadata store that holds the Trainer's
    Model at URI's folder and a run of the pipeline (whose context records the blessing)."""
    server = VertexServer()
    server.entry(*aliases_by_version, metadata=False, **labels_by_version)
    server.model_artifact("gs://my-bucket/root/Trainer/model/7", MODEL_ARTIFACT)
    return server


def stub_model_and_check(monkeypatch) -> None:
    monkeypatch.setattr(registry_blessing, "model_label", lambda uri: "f7")
    monkeypatch.setattr(registry_actions, "serving_check", lambda config, uri: "passed (stub)")


def test_serving_bless_vertex_uploads_records_the_blessing_then_moves_all_traffic(
    monkeypatch, capsys
):
    stub_model_and_check(monkeypatch)
    server = blessing_server(("default",))
    server.endpoint(("11", "1"))

    argv = ["bless", "--model-uri", URI, "--reason", "PO accepts"]
    assert serving(monkeypatch, server, *argv) == 0

    methods = [sent.method for sent in server.sent]
    first_change = methods.index("UpdateModel")
    for lookup in ("ListArtifacts", "ListPipelineJobs", "GetPipelineJob"):
        assert methods.index(lookup) < first_change  # where to record it, before anything moves
    assert [w.method for w in server.changes()] == [
        "UpdateModel",  # the intent on version 1, which serves until the upload
        "UploadModel",  # with an intent of its own: the next command finishes what this leaves
        "CreateArtifact",  # the ModelBlessing
        "CreateArtifact",  # the PushedModel
        "CreateExecution",
        "AddExecutionEvents",
        "AddContextArtifactsAndExecutions",
        "DeployModel",
        "UpdateModel",  # the upload's intent removed
        "UpdateModel",  # the intent on version 1 removed
    ]
    assert methods.index("UploadModel") < methods.index(
        "ListModelVersions", methods.index("UploadModel")
    )
    assert server.request("ListArtifacts").filter == (
        'schema_title="tfx.Model" AND uri="gs://my-bucket/root/Trainer/model/7"'
    )
    assert INTENT_LABEL in server.request("UploadModel").model.labels
    assert INTENT_LABEL not in server.version("2").labels
    assert INTENT_LABEL not in server.version("1").labels
    blessing, pushed = (
        w.request.artifact for w in server.changes() if w.method == "CreateArtifact"
    )
    assert blessing.schema_title == "tfx.ModelBlessing"
    assert blessing.state == gca.Artifact.State.LIVE
    assert blessing.metadata["blessed"] == 1  # what the Vertex resolver's query matches
    assert blessing.metadata["current_model_id"] == MODEL_ARTIFACT  # what it then reads
    assert blessing.metadata["manual_blessing_reason"] == "PO accepts"
    assert pushed.metadata["pushed_destination"] == URI  # a rollback of version 2 finds it
    events = server.request("AddExecutionEvents")
    assert events.execution == f"{STORE}/executions/created-3"
    assert [(e.artifact, e.type_) for e in events.events] == [
        (MODEL_ARTIFACT, gca.Event.Type.INPUT),
        (f"{STORE}/artifacts/created-1", gca.Event.Type.OUTPUT),
        (f"{STORE}/artifacts/created-2", gca.Event.Type.OUTPUT),
    ]
    context = server.request("AddContextArtifactsAndExecutions")
    assert context.context == CONTEXT
    assert list(context.artifacts) == [
        f"{STORE}/artifacts/created-1",
        f"{STORE}/artifacts/created-2",
    ]
    assert server.request("DeployModel").deployed_model.model == f"{MODEL}@2"
    assert server.default() == "2"
    out = capsys.readouterr().out
    assert f"as {MODEL}@2" in out and f"recorded {STORE}/artifacts/created-1" in out


def test_serving_bless_vertex_of_a_model_metadata_does_not_know_is_one_line_and_moves_nothing(
    monkeypatch, capsys
):
    stub_model_and_check(monkeypatch)
    server = VertexServer()
    server.entry(("default",), metadata=False)

    assert serving(monkeypatch, server, "bless", "--model-uri", URI, "--reason", "ok") == 1

    err = capsys.readouterr().err
    assert err == (
        f"tpu-pipeline: {URI}: Vertex ML Metadata has no Model artifact at "
        "gs://my-bucket/root/Trainer/model/7; give the Format-Serving folder of a run's Trainer\n"
    )
    assert server.sent[-1].method == "ListArtifacts" and server.changes() == []  # no upload


def test_a_failure_to_record_after_the_upload_says_it_serves_and_to_bless_again(
    monkeypatch, capsys
):
    stub_model_and_check(monkeypatch)
    server = blessing_server(("default",), v1={FINGERPRINT_LABEL: "f7"})
    server.fail("AddExecutionEvents", exceptions.ServiceUnavailable("metadata store unavailable"))

    assert serving(monkeypatch, server, "bless", "--model-uri", URI, "--reason", "ok") == 1

    err = capsys.readouterr().err
    assert err.startswith(
        f"tpu-pipeline: {URI}: serves, but Vertex ML Metadata did not record the blessing ("
    )
    assert err.endswith(
        "nothing is uploaded twice; the action is half done: the next "
        "`tpu-pipeline serving ... --vertex` command or registry Pusher finishes it\n"
    )
    assert server.default() == "1" and BLESSED_LABEL in server.version("1").labels  # it serves


def test_serving_bless_vertex_without_model_uri_is_one_line_and_dry_runs_show_the_real_bless(
    monkeypatch, capsys
):
    config = ["--config", "kubeflow/vertex-gpu.yaml"]
    assert main(["serving", "bless", "--vertex", "--dry-run", "--reason", "ok", *config]) == 1
    assert capsys.readouterr().err.startswith(
        "tpu-pipeline: serving bless --vertex: give --model-uri"
    )

    monkeypatch.setattr(registry_blessing, "model_label", lambda uri: "f7")

    def dry_run(server) -> list[dict]:
        argv = ["bless", "--model-uri", URI, "--reason", "ok", "--dry-run"]
        assert serving(monkeypatch, server, *argv, config="kubeflow/vertex-gpu.yaml") == 0
        printed = json.loads(capsys.readouterr().out)
        assert server.changes() == []  # a dry run changes nothing
        for step in printed:  # each call parses back as its aiplatform_v1 request type
            if not step["method"].startswith("Step."):
                request_type = getattr(gca, f"{step['method'].split('.')[1]}Request")
                request_type.from_json(json.dumps(step["request"]))
        return printed

    new = dry_run(blessing_server(("default",)))
    methods = [c["method"].split(".")[1] for c in new]
    check = methods.index("ServingCheck")  # the serving check the real bless runs, not run here
    assert new[check]["request"] == {"model_uri": URI} and not new[check]["sent"]
    assert methods.index("ListArtifacts") < check < methods.index("UploadModel")
    upload = new[methods.index("UploadModel")]
    assert upload["request"]["model"]["artifactUri"] == URI and not upload["sent"]
    assert INTENT_LABEL in upload["request"]["model"]["labels"]
    # The re-read after the upload, as the real bless makes it, sees the uploaded version.
    assert "ListModelVersions" in methods[methods.index("UploadModel") :]
    assert methods.count("CreateArtifact") == 2 and "AddContextArtifactsAndExecutions" in methods

    registered = dry_run(blessing_server(("default",), (), v2={FINGERPRINT_LABEL: "f7"}))
    changes = [c for c in registered if not c["sent"]]
    assert "ModelService.UploadModel" not in [c["method"] for c in changes]
    described = [
        c
        for c in changes
        if c["method"] == "ModelService.UpdateModel"
        and BLESSED_LABEL in c["request"]["model"].get("labels", {})
    ]
    assert described and described[0]["request"]["model"]["name"] == f"{MODEL}@2"
    assert {
        "method": "ModelService.MergeVersionAliases",
        "sent": False,
        "request": {"name": f"{MODEL}@2", "versionAliases": ["default"]},
    } in changes


def test_serving_bless_vertex_runs_the_serving_check_on_a_local_copy_and_uploads_nothing_refused(
    monkeypatch, capsys, tmp_path
):
    from tests.components.serving.served_models import DIGITS, save_model, write_eval_split
    from tpu_pipeline.components.serving.warmup import write_warmup_requests

    refused = save_model(tmp_path / "model", {"images": "raises"})  # stands in for gs://
    write_warmup_requests(refused, write_eval_split(tmp_path / "eval"), DIGITS)
    copied = []
    temp_dir = tmp_path / "tmp"  # where the local copy and the check's own copy go
    temp_dir.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp_dir))

    def copy_dir(source, destination):  # what tf.io.gfile reads from Cloud Storage
        copied.append((source, pathlib.Path(destination)))
        shutil.copytree(refused, destination, dirs_exist_ok=True)

    monkeypatch.setattr(registry_blessing, "model_label", lambda uri: "f7")
    monkeypatch.setattr(registry_actions.io_utils, "copy_dir", copy_dir)
    server = blessing_server(("default",))

    assert serving(monkeypatch, server, "bless", "--model-uri", URI, "--reason", "ok") == 1

    err = capsys.readouterr().err
    assert err.startswith(f"tpu-pipeline: {URI}: the candidate failed the serving check (")
    assert err.endswith("; nothing was uploaded\n") and err.count("\n") == 1
    assert "images" in err  # the signature that failed
    source, local = copied[0]
    assert source == URI  # the check then serves the local copy...
    assert local.parent.parent == temp_dir
    assert local.parent.name.startswith(registry_actions.CHECKED_COPIES.prefix)
    assert list(temp_dir.iterdir()) == []  # ...removed with the check's own copy
    assert server.changes() == []


def test_a_bless_stopped_after_the_upload_is_finished_by_the_next_command(monkeypatch, capsys):
    stub_model_and_check(monkeypatch)
    server = blessing_server(("default",))
    server.fail("CreateArtifact", exceptions.ServiceUnavailable("metadata store unavailable"))

    assert serving(monkeypatch, server, "bless", "--model-uri", URI, "--reason", "ok") == 1
    capsys.readouterr()
    assert server.version("2").labels[INTENT_LABEL].startswith("bless-self-")

    before = len(server.sent)
    assert serving(monkeypatch, server, "list") == 0  # its lease ended with the failure

    out = capsys.readouterr().out
    assert f"{MODEL}@2: the bless of " in out and "was left half done; finishing it" in out
    finishing = server.sent[before:]
    assert "UploadModel" not in [s.method for s in finishing]  # not uploaded twice
    created = [s.request.artifact for s in finishing if s.method == "CreateArtifact"]
    assert [a.schema_title for a in created] == ["tfx.ModelBlessing", "tfx.PushedModel"]
    assert created[1].metadata["pushed_destination"] == URI
    cleared = [
        s.request.model
        for s in finishing
        if s.method == "UpdateModel" and s.request.model.name == f"{MODEL}@2"
    ][-1]
    assert INTENT_LABEL not in cleared.labels
    assert INTENT_LABEL not in server.version("2").labels
    assert INTENT_LABEL not in server.version("1").labels
