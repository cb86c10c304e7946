"""Each pushed model becomes a new version of one Model Registry entry, not a new model."""

from __future__ import annotations

import types

from kubeflow.model_registry import upload_model_version
from pipeline.config import ModelRegistryConfig


class FakeResource:
    def __init__(self, resource_name: str, calls: list):
        self.resource_name = resource_name
        self._calls = calls

    def deploy(self, **kwargs):
        self._calls.append(("deploy", kwargs))


def fake_aiplatform(existing_models: list[str], existing_endpoints: list[str]):
    """Records the calls the upload makes; lists return the given resource names."""
    calls: list = []

    def lister(names):
        def list_(filter, project, location):
            calls.append(("list", filter, project, location))
            return [FakeResource(name, calls) for name in names]

        return list_

    def upload(**kwargs):
        calls.append(("upload", kwargs))
        return FakeResource("projects/p/locations/r/models/1@2", calls)

    def create(**kwargs):
        calls.append(("create_endpoint", kwargs))
        return FakeResource("projects/p/locations/r/endpoints/new", calls)

    module = types.SimpleNamespace(
        Model=types.SimpleNamespace(list=lister(existing_models), upload=upload),
        Endpoint=types.SimpleNamespace(list=lister(existing_endpoints), create=create),
    )
    return module, calls


def _uploads(calls):
    return [kwargs for name, kwargs, *_ in calls if name == "upload"]


def test_first_upload_creates_the_entry_later_ones_add_versions_to_it():
    registry = ModelRegistryConfig(model_display_name="digits-cnn")
    aiplatform, calls = fake_aiplatform([], [])
    upload_model_version("gs://b/serving/1", registry, "my-project", "us-central1", aiplatform)
    assert _uploads(calls)[0]["parent_model"] is None
    assert ("list", 'display_name="digits-cnn"', "my-project", "us-central1") in calls

    aiplatform, calls = fake_aiplatform(["projects/p/locations/r/models/1"], [])
    upload_model_version("gs://b/serving/2", registry, "my-project", "us-central1", aiplatform)
    (upload,) = _uploads(calls)
    assert upload["parent_model"] == "projects/p/locations/r/models/1"
    assert upload["artifact_uri"] == "gs://b/serving/2"
    assert upload["display_name"] == "digits-cnn"
    assert upload["is_default_version"] is True
    assert not [c for c in calls if c[0] == "deploy"]  # no endpoint configured


def test_new_version_is_deployed_to_the_named_endpoint_created_once():
    registry = ModelRegistryConfig(model_display_name="digits-cnn", endpoint_display_name="digits")
    aiplatform, calls = fake_aiplatform([], [])
    upload_model_version("gs://b/serving/1", registry, "p", "r", aiplatform)
    assert [c[1]["display_name"] for c in calls if c[0] == "create_endpoint"] == ["digits"]
    (deploy,) = [c[1] for c in calls if c[0] == "deploy"]
    assert deploy["endpoint"].resource_name.endswith("endpoints/new")
    assert deploy["traffic_percentage"] == 100

    aiplatform, calls = fake_aiplatform([], ["projects/p/locations/r/endpoints/7"])
    upload_model_version("gs://b/serving/2", registry, "p", "r", aiplatform)
    assert not [c for c in calls if c[0] == "create_endpoint"]
    (deploy,) = [c[1] for c in calls if c[0] == "deploy"]
    assert deploy["endpoint"].resource_name.endswith("endpoints/7")
