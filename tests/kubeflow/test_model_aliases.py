"""Rollback on Vertex AI moves the `default` alias back and marks the version it left."""

from __future__ import annotations

import datetime
import json

import pytest
from google.cloud.aiplatform_v1 import types as gca

from cli.main import main
from kubeflow import model_aliases
from kubeflow.model_aliases import FOUND_MODEL, RollbackError, rollback_calls
from kubeflow.model_registry import FINGERPRINT_LABEL, ROLLED_BACK_LABEL
from tests.kubeflow.test_model_registry import FakeVertex, register, saved_model_dir

MODEL = "projects/p/locations/us-central1/models/123"
NOW = datetime.datetime(2026, 12, 1, 14, 0, tzinfo=datetime.timezone.utc)


def version(version_id: str, *aliases: str, **labels: str) -> gca.Model:
    return gca.Model(
        name=MODEL, version_id=version_id, version_aliases=list(aliases), labels=labels
    )


def test_rollback_labels_the_default_version_then_moves_default_to_the_one_before():
    versions = [version("1"), version("2"), version("3", "default", **{FINGERPRINT_LABEL: "ab"})]

    label, move = rollback_calls(MODEL, versions, "wrong labels", NOW)

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


def test_a_second_rollback_skips_versions_rolled_back_before():
    versions = [
        version("1"),
        version("2", "default"),
        version("3", **{ROLLED_BACK_LABEL: "1"}),
    ]
    assert rollback_calls(MODEL, versions, "again", NOW)[1].request.name == f"{MODEL}@1"

    versions = [version("1", **{ROLLED_BACK_LABEL: "1"}), version("2", "default")]
    with pytest.raises(RollbackError, match="nothing to roll back to"):
        rollback_calls(MODEL, versions, "no more", NOW)


def test_serving_rollback_vertex_dry_run_prints_the_lookup_and_both_requests(capsys):
    argv = ["serving", "rollback", "--vertex", "--dry-run", "--reason", "bad"]
    assert main([*argv, "--config", "kubeflow/vertex-tpu.yaml"]) == 0

    printed = json.loads(capsys.readouterr().out)
    assert list(printed) == ["lookup", "versions", "label_rolled_back", "move_default_alias"]
    assert printed["lookup"]["method"] == "ModelService.ListModels"
    assert printed["lookup"]["request"]["filter"] == 'display_name="tpu-pipeline-digits"'
    assert printed["versions"]["request"]["name"] == FOUND_MODEL
    assert printed["move_default_alias"]["request"]["versionAliases"] == ["default"]
    assert printed["move_default_alias"]["request"]["name"].endswith(model_aliases.FOUND_PREVIOUS)


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
