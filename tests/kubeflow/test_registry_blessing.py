"""`serving bless --vertex`: the refused model becomes the served registry version, marked."""

from __future__ import annotations

import json
import types

import pytest

from cli.main import main
from common.config import ModelRegistryConfig
from kubeflow import registry_blessing
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


def test_serving_bless_vertex_uploads_then_sends_all_traffic_to_the_uploaded_version(
    monkeypatch, capsys
):
    monkeypatch.setattr(registry_blessing, "model_label", lambda uri: "f7")
    api = FakeVertexApi([version("1", "default")], [endpoint(("11", "1"))])
    done = types.SimpleNamespace(model=MODEL, model_version_id="2")
    api.answers["ModelService.UploadModel"] = types.SimpleNamespace(result=lambda timeout: done)

    argv = ["bless", "--model-uri", URI, "--reason", "PO accepts"]
    assert serving_vertex(monkeypatch, api, *argv) == 0

    methods = [call.method.split(".")[1] for call in api.sent]
    assert methods == [
        "ListModels",
        "ListModelVersions",
        "UploadModel",
        "ListEndpoints",
        "DeployModel",
    ]
    assert api.sent[-1].request.deployed_model.model == f"{MODEL}@2"
    assert f"as {MODEL}@2" in capsys.readouterr().out


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
        "if_not_registered",
        "if_registered_describe_blessing",
        "if_registered_move_default_alias",
    ]  # vertex-gpu.yaml deploys to no endpoint: no traffic steps
    assert printed["if_not_registered"]["request"]["model"]["artifactUri"] == URI
