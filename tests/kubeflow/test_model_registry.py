"""Each pushed model becomes a new version of one Model Registry entry, not a new model."""

from __future__ import annotations

import json
import types

from common.config import ModelRegistryConfig
from kubeflow.model_registry import upload_model_version


class FakeResource:
    def __init__(self, resource_name: str, calls: list):
        self.resource_name = resource_name
        self.version_id = "1"
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


def _run_executor(monkeypatch, *, pushed: bool, already_pushed: bool) -> list:
    """Runs RegistryPusherExecutor after a filesystem push with the given outcome."""
    from tfx.types import standard_artifacts

    from common.config import load_config
    from components.pusher import ALREADY_PUSHED_PROPERTY, AtomicPusherExecutor
    from kubeflow import model_registry
    from kubeflow.model_registry import RegistryPusherExecutor, registry_custom_config
    from tests.kubeflow.conftest import DEPLOYMENT_CONFIGS

    def filesystem_push(self, input_dict, output_dict, exec_properties):
        (pushed_model,) = output_dict["pushed_model"]
        pushed_model.set_int_custom_property("pushed", int(pushed))
        pushed_model.set_string_custom_property("pushed_destination", "gs://b/serving/17")
        pushed_model.set_int_custom_property(ALREADY_PUSHED_PROPERTY, int(already_pushed))

    uploads: list = []
    monkeypatch.setattr(AtomicPusherExecutor, "Do", filesystem_push)
    monkeypatch.setattr(
        model_registry,
        "upload_model_version",
        lambda *args: uploads.append(args) or FakeResource("m", []),
    )
    vertex = load_config(str(DEPLOYMENT_CONFIGS["tpu"])).vertex
    exec_properties = {"custom_config": json.dumps(registry_custom_config(vertex))}
    output = {"pushed_model": [standard_artifacts.PushedModel()]}
    RegistryPusherExecutor().Do({}, output, exec_properties)
    return uploads


def test_executor_registers_only_a_newly_pushed_model(monkeypatch):
    (upload,) = _run_executor(monkeypatch, pushed=True, already_pushed=False)
    model_dir, registry, project, region, _ = upload
    assert model_dir == "gs://b/serving/17"
    assert registry.model_display_name == "tpu-pipeline-digits"
    assert (project, region) == ("your-gcp-project", "us-central1")

    assert _run_executor(monkeypatch, pushed=False, already_pushed=False) == []  # not blessed
    assert _run_executor(monkeypatch, pushed=True, already_pushed=True) == []  # same model again
