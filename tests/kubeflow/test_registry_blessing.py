"""`serving bless --vertex`: the refused model becomes the served registry version, marked."""

from __future__ import annotations

import json
import shutil
import types

import pytest
from google.api_core import exceptions

from cli.main import main
from common.config import ModelRegistryConfig
from kubeflow import registry_actions, registry_blessing
from kubeflow import vertex_types as gca
from kubeflow.model_aliases import RegistryActionError
from kubeflow.model_registry import FINGERPRINT_LABEL, PINNED_ALIAS, ROLLED_BACK_LABEL
from kubeflow.registry_blessing import BLESSED_LABEL, bless_change
from tests.kubeflow.test_model_aliases import (
    MODEL,
    NOW,
    FakeVertexApi,
    endpoint,
    serving_vertex,
    version,
)

STORE = "projects/p/locations/us-central1/metadataStores/default"
CONTEXT = f"{STORE}/contexts/tpu-pipeline-digits"
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


def uploads_version_2(api) -> types.SimpleNamespace:
    """The upload's operation: once done, the registry lists version 2 as uploaded."""

    def result(timeout):
        model = api.request("UploadModel").model
        uploaded = gca.Model(model, name=MODEL, version_id="2")
        api.answers["ModelService.ListModelVersions"].append(uploaded)
        return types.SimpleNamespace(model=MODEL, model_version_id="2")

    return types.SimpleNamespace(result=result)


class FakeBlessingVertexApi(FakeVertexApi):
    """FakeVertexApi whose metadata store holds the Model and a run, and names what it creates."""

    def __init__(self, versions, endpoints, models=(MODEL_ARTIFACT,)):
        models = [
            gca.Artifact(name=name, uri="gs://my-bucket/root/Trainer/model/7") for name in models
        ]
        super().__init__(versions, endpoints)
        job = gca.PipelineJob(
            name="projects/p/locations/us-central1/pipelineJobs/run-1",
            job_detail=gca.PipelineJobDetail(pipeline_context=gca.Context(name=CONTEXT)),
        )
        self.answers.update(
            {
                "MetadataService.ListArtifacts": models,
                "PipelineService.ListPipelineJobs": [gca.PipelineJob(name=job.name)],
                "PipelineService.GetPipelineJob": job,
            }
        )

    def send(self, call, region, credentials):
        if call.method in ("MetadataService.CreateArtifact", "MetadataService.CreateExecution"):
            self.sent.append(call)
            created = call.request.artifact if "Artifact" in call.method else call.request.execution
            return type(created)(created, name=f"{STORE}/created/{len(self.sent)}")
        return super().send(call, region, credentials)

    def request(self, method: str):
        return next(call.request for call in self.sent if call.method.endswith(method))


def test_serving_bless_vertex_uploads_records_the_blessing_then_moves_all_traffic(
    monkeypatch, capsys
):
    monkeypatch.setattr(registry_blessing, "model_label", lambda uri: "f7")
    monkeypatch.setattr(registry_actions, "serving_check", lambda config, uri: "passed (stub)")
    api = FakeBlessingVertexApi([version("1", "default")], [endpoint(("11", "1"))])
    api.answers["ModelService.UploadModel"] = uploads_version_2(api)

    argv = ["bless", "--model-uri", URI, "--reason", "PO accepts"]
    assert serving_vertex(monkeypatch, api, *argv) == 0

    methods = [call.method.split(".")[1] for call in api.sent]
    assert methods == [
        "ListModels",
        "ListModelVersions",
        "ListArtifacts",  # the Model artifact of --model-uri, before anything moves
        "ListPipelineJobs",
        "GetPipelineJob",  # its job_detail names the pipeline context
        "UploadModel",  # with the intent label: the next command finishes what this leaves
        "ListModelVersions",
        "CreateArtifact",  # the ModelBlessing
        "CreateArtifact",  # the PushedModel
        "CreateExecution",
        "AddExecutionEvents",
        "AddContextArtifactsAndExecutions",
        "ListEndpoints",
        "DeployModel",
        "UpdateModel",  # the intent label removed
        "ListModelVersions",
    ]
    assert api.request("ListArtifacts").filter == (
        'schema_title="tfx.Model" AND uri="gs://my-bucket/root/Trainer/model/7"'
    )
    assert registry_actions.INTENT_LABEL in api.request("UploadModel").model.labels
    assert registry_actions.INTENT_LABEL not in api.request("UpdateModel").model.labels
    blessing = api.sent[7].request.artifact
    assert blessing.schema_title == "tfx.ModelBlessing"
    assert blessing.state == gca.Artifact.State.LIVE
    assert blessing.metadata["blessed"] == 1  # what the Vertex resolver's query matches
    assert blessing.metadata["current_model_id"] == MODEL_ARTIFACT  # what it then reads
    assert blessing.metadata["manual_blessing_reason"] == "PO accepts"
    pushed = api.sent[8].request.artifact
    assert pushed.metadata["pushed_destination"] == URI  # a rollback of version 2 finds it
    events = api.request("AddExecutionEvents")
    assert events.execution == f"{STORE}/created/10"
    assert [(e.artifact, e.type_) for e in events.events] == [
        (MODEL_ARTIFACT, gca.Event.Type.INPUT),
        (f"{STORE}/created/8", gca.Event.Type.OUTPUT),
        (f"{STORE}/created/9", gca.Event.Type.OUTPUT),
    ]
    context = api.request("AddContextArtifactsAndExecutions")
    assert context.context == CONTEXT
    assert list(context.artifacts) == [f"{STORE}/created/8", f"{STORE}/created/9"]
    assert api.request("DeployModel").deployed_model.model == f"{MODEL}@2"
    out = capsys.readouterr().out
    assert f"as {MODEL}@2" in out and f"recorded {STORE}/created/8" in out


def test_serving_bless_vertex_of_a_model_metadata_does_not_know_is_one_line_and_moves_nothing(
    monkeypatch, capsys
):
    monkeypatch.setattr(registry_blessing, "model_label", lambda uri: "f7")
    monkeypatch.setattr(registry_actions, "serving_check", lambda config, uri: "passed (stub)")
    api = FakeBlessingVertexApi([version("1", "default")], [], models=())

    assert serving_vertex(monkeypatch, api, "bless", "--model-uri", URI, "--reason", "ok") == 1

    err = capsys.readouterr().err
    assert err == (
        f"tpu-pipeline: {URI}: Vertex ML Metadata has no Model artifact at "
        "gs://my-bucket/root/Trainer/model/7; give the Format-Serving folder of a run's Trainer\n"
    )
    assert [c.method for c in api.sent][-1] == "MetadataService.ListArtifacts"  # no upload


def test_a_failure_to_record_after_the_upload_says_it_serves_and_to_bless_again(
    monkeypatch, capsys
):
    monkeypatch.setattr(registry_blessing, "model_label", lambda uri: "f7")
    monkeypatch.setattr(registry_actions, "serving_check", lambda config, uri: "passed (stub)")
    api = FakeBlessingVertexApi([version("1", "default", **{FINGERPRINT_LABEL: "f7"})], [])
    api.send_before = api.send

    def unavailable(call, region, credentials):
        if call.method == "MetadataService.AddExecutionEvents":
            raise exceptions.ServiceUnavailable("metadata store unavailable")
        return api.send_before(call, region, credentials)

    api.send = unavailable
    assert serving_vertex(monkeypatch, api, "bless", "--model-uri", URI, "--reason", "ok") == 1

    err = capsys.readouterr().err
    assert err.startswith(
        f"tpu-pipeline: {URI}: serves, but Vertex ML Metadata did not record the blessing ("
    )
    assert err.endswith(
        "nothing is uploaded twice; the action is half done: the next "
        "`tpu-pipeline serving ... --vertex` command or registry Pusher finishes it\n"
    )
    assert "ModelService.MergeVersionAliases" in [c.method for c in api.sent]  # it serves


def test_serving_bless_vertex_without_model_uri_is_one_line_and_dry_run_prints_both_cases(
    capsys,
):
    config = ["--config", "kubeflow/vertex-gpu.yaml"]
    assert main(["serving", "bless", "--vertex", "--dry-run", "--reason", "ok", *config]) == 1
    assert capsys.readouterr().err.startswith(
        "tpu-pipeline: serving bless --vertex: give --model-uri"
    )

    argv = ["serving", "bless", "--vertex", "--dry-run", "--reason", "ok", "--model-uri", URI]
    assert main([*argv, *config]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert list(printed)[2:] == [
        "metadata_model_lookup",  # where to record it is found before anything moves
        "pipeline_run_lookup",
        "pipeline_run",
        "if_registered_write_intent",
        "if_not_registered",  # the upload carries the intent label
        "if_registered_describe_blessing",
        "if_registered_move_default_alias",
        "create_blessing",
        "create_pushed_model",
        "create_execution",
        "add_events",
        "add_to_pipeline_context",
        "clear_intent",
    ]  # vertex-gpu.yaml deploys to no endpoint: no traffic steps
    for step in printed.values():  # each parses back as its aiplatform_v1 request type
        request_type = getattr(gca, f"{step['method'].split('.')[1]}Request")
        request_type.from_json(json.dumps(step["request"]))
    assert printed["if_not_registered"]["request"]["model"]["artifactUri"] == URI


def test_serving_bless_vertex_runs_the_serving_check_on_a_local_copy_and_uploads_nothing_refused(
    monkeypatch, capsys, tmp_path
):
    from components.serving.warmup import write_warmup_requests
    from tests.components.serving.served_models import DIGITS, save_model, write_eval_split

    refused = save_model(tmp_path / "model", {"images": "raises"})  # stands in for gs://
    write_warmup_requests(refused, write_eval_split(tmp_path / "eval"), DIGITS)
    copied_from = []

    def copy_dir(source, destination):  # what tf.io.gfile reads from Cloud Storage
        copied_from.append(source)
        shutil.copytree(refused, destination, dirs_exist_ok=True)

    monkeypatch.setattr(registry_blessing, "model_label", lambda uri: "f7")
    monkeypatch.setattr(registry_actions.io_utils, "copy_dir", copy_dir)
    api = FakeBlessingVertexApi([version("1", "default")], [])

    assert serving_vertex(monkeypatch, api, "bless", "--model-uri", URI, "--reason", "ok") == 1

    err = capsys.readouterr().err
    assert err.startswith(f"tpu-pipeline: {URI}: the candidate failed the serving check (")
    assert err.endswith("; nothing was uploaded\n") and err.count("\n") == 1
    assert "images" in err  # the signature that failed
    assert copied_from[0] == URI  # the check then serves the local copy
    sent = [c.method for c in api.sent]
    assert "ModelService.UploadModel" not in sent and "ModelService.UpdateModel" not in sent


def test_a_bless_stopped_after_the_upload_is_finished_by_the_next_command(monkeypatch, capsys):
    monkeypatch.setattr(registry_blessing, "model_label", lambda uri: "f7")
    monkeypatch.setattr(registry_actions, "serving_check", lambda config, uri: "passed (stub)")
    api = FakeBlessingVertexApi([version("1", "default")], [])
    api.answers["ModelService.UploadModel"] = uploads_version_2(api)
    send = api.send

    def metadata_down(call, region, credentials):
        if call.method == "MetadataService.CreateArtifact":
            raise exceptions.ServiceUnavailable("metadata store unavailable")
        return send(call, region, credentials)

    api.send = metadata_down
    assert serving_vertex(monkeypatch, api, "bless", "--model-uri", URI, "--reason", "ok") == 1
    capsys.readouterr()
    (uploaded,) = [v for v in api.answers["ModelService.ListModelVersions"] if v.version_id == "2"]
    assert uploaded.labels[registry_actions.INTENT_LABEL].startswith("bless-self-")

    api.send = send
    before = len(api.sent)
    assert serving_vertex(monkeypatch, api, "list") == 0

    out = capsys.readouterr().out
    assert f"{MODEL}@2: the bless of " in out and "was left half done; finishing it" in out
    finishing = api.sent[before:]
    assert "ModelService.UploadModel" not in [c.method for c in finishing]  # not uploaded twice
    created = [c.request.artifact for c in finishing if c.method.endswith("CreateArtifact")]
    assert [a.schema_title for a in created] == ["tfx.ModelBlessing", "tfx.PushedModel"]
    assert created[1].metadata["pushed_destination"] == URI
    (cleared,) = [c.request.model for c in finishing if c.method.endswith("UpdateModel")]
    assert cleared.name == f"{MODEL}@2" and registry_actions.INTENT_LABEL not in cleared.labels
