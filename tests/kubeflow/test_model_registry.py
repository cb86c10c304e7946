"""Each pushed model becomes one version of one Model Registry entry, and is never missed.

The fake registry keeps versions with their labels and answers label filters
the way Vertex AI does, so "already registered" is decided from it, as in
production, and an upload or deploy that fails can be retried.
"""

from __future__ import annotations

import json
import re
import types

import pytest
from tensorflow.core.protobuf import fingerprint_pb2

from common.config import ModelRegistryConfig
from components import pusher
from components.serving.server_check import ServingCheckResult
from kubeflow.model_registry import FINGERPRINT_LABEL, register_model_version

PASSED = ServingCheckResult(("serving_default",), 0.1, 0.1, "model_server.py")


class FakeVertex:
    """The part of `google.cloud.aiplatform` the registry uses, backed by lists.

    `fail_once` names operations ("upload", "deploy") whose next call raises,
    as a network error or a quota would. `before_upload` runs inside the next
    upload, before it lands: what another person does meanwhile.
    """

    def __init__(self):
        self.entries: dict[str, dict] = {}  # resource name -> display name and versions
        self.endpoints: list[types.SimpleNamespace] = []
        self.fail_once: set[str] = set()
        self.uploads: list[dict] = []
        self.before_upload = lambda: None
        vertex = self

        class Model:
            def __new__(cls, model_name, version, project, location):
                return vertex.entries[model_name]["versions"][int(version) - 1]

            @staticmethod
            def list(filter, project, location):
                name = re.fullmatch(r'display_name="(.*)"', filter)[1]
                return [
                    types.SimpleNamespace(resource_name=resource)
                    for resource, entry in vertex.entries.items()
                    if entry["display_name"] == name
                ]

            @staticmethod
            def upload(**kwargs):
                vertex._maybe_fail("upload")
                vertex.before_upload()
                vertex.uploads.append(kwargs)
                parent = kwargs["parent_model"] or f"models/{len(vertex.entries) + 1}"
                entry = vertex.entries.setdefault(
                    parent, {"display_name": kwargs["display_name"], "versions": []}
                )
                version = FakeVersion(vertex, parent, str(len(entry["versions"]) + 1), kwargs)
                if kwargs["is_default_version"] or not entry["versions"]:
                    for other in entry["versions"]:  # an alias names one version
                        other.version_aliases = [a for a in other.version_aliases if a != "default"]
                    version.version_aliases.append("default")
                entry["versions"].append(version)
                return version

        class ModelRegistry:
            def __init__(self, parent, project, location):
                self.parent = parent

            def list_versions(self, filter=None):
                """Every version, or those whose label matches `labels.KEY="VALUE"`."""
                key, value = (
                    re.fullmatch(r'labels\.(\w+)="(.*)"', filter).groups() if filter else 2 * [None]
                )
                return [
                    types.SimpleNamespace(
                        version_id=version.version_id,
                        version_aliases=list(version.version_aliases),
                        version_description=version.version_description,
                    )
                    for version in vertex.entries[self.parent]["versions"]
                    if filter is None or version.labels.get(key) == value
                ]

            def add_version_aliases(self, new_aliases, version):
                """An alias names one version: giving it to one takes it from the others."""
                for other in vertex.entries[self.parent]["versions"]:
                    other.version_aliases = [
                        a for a in other.version_aliases if a not in new_aliases
                    ]
                    if other.version_id == version:
                        other.version_aliases.extend(new_aliases)

        class Endpoint:
            @staticmethod
            def list(filter, project, location):
                name = re.fullmatch(r'display_name="(.*)"', filter)[1]
                return [e for e in vertex.endpoints if e.display_name == name]

            @staticmethod
            def create(display_name, project, location):
                endpoint = types.SimpleNamespace(
                    display_name=display_name, deployed=[], traffic_split={}, undeployed=[]
                )
                endpoint.list_models = lambda: list(endpoint.deployed)

                def undeploy(deployed_model_id):
                    assert endpoint.traffic_split.get(deployed_model_id, 0) == 0  # as Vertex
                    endpoint.undeployed.append(deployed_model_id)
                    endpoint.deployed = [d for d in endpoint.deployed if d.id != deployed_model_id]

                endpoint.undeploy = undeploy
                vertex.endpoints.append(endpoint)
                return endpoint

        self.Model, self.ModelRegistry, self.Endpoint = Model, ModelRegistry, Endpoint

    def _maybe_fail(self, operation: str) -> None:
        if operation in self.fail_once:
            self.fail_once.remove(operation)
            raise ConnectionError(f"{operation}: 503 Service Unavailable")

    def versions(self, display_name: str) -> list:
        return [
            version
            for entry in self.entries.values()
            if entry["display_name"] == display_name
            for version in entry["versions"]
        ]


class FakeVersion:
    def __init__(self, vertex: FakeVertex, parent: str, version_id: str, upload: dict):
        self._vertex = vertex
        self.resource_name, self.version_id = parent, version_id
        self.artifact_uri, self.labels = upload["artifact_uri"], upload.get("labels", {})
        self.version_aliases: list[str] = []
        self.version_description = ""

    @property
    def api_client(self):
        """ModelService's update_model, as the SDK's client takes it."""
        return types.SimpleNamespace(update_model=self._update_model)

    def _update_model(self, model, update_mask):
        entry, version_id = model.name.split("@")  # a version of the entry, by its id
        assert list(update_mask.paths) == ["labels"]
        (version,) = [
            v for v in self._vertex.entries[entry]["versions"] if v.version_id == version_id
        ]
        version.labels = dict(model.labels)

    def deploy(self, endpoint, machine_type, traffic_percentage):
        self._vertex._maybe_fail("deploy")
        deployed = types.SimpleNamespace(
            id=f"d{self.version_id}", model=self.resource_name, model_version_id=self.version_id
        )
        endpoint.deployed.append(deployed)
        endpoint.traffic_split = {deployed.id: traffic_percentage}  # 100: the others get 0


def saved_model_dir(tmp_path, checksum: int) -> str:
    """A folder with just the SavedModel fingerprint the registry reads."""
    folder = tmp_path / f"model-{checksum}"
    folder.mkdir()
    fingerprint = fingerprint_pb2.FingerprintDef(saved_model_checksum=checksum, checkpoint_hash=7)
    (folder / "fingerprint.pb").write_bytes(fingerprint.SerializeToString())
    return str(folder)


def register(model_dir: str, vertex: FakeVertex, **registry):
    config = ModelRegistryConfig(**{"model_display_name": "digits-cnn", **registry})
    return register_model_version(model_dir, config, "my-project", "us-central1", vertex)


def test_models_become_versions_of_one_entry_each_labelled_with_its_fingerprint(tmp_path):
    vertex = FakeVertex()
    model_dirs = [saved_model_dir(tmp_path, 1), saved_model_dir(tmp_path, 2)]
    first, second = (register(model_dir, vertex) for model_dir in model_dirs)
    assert first.newly_registered and second.newly_registered
    versions = vertex.versions("digits-cnn")
    assert [(v.version_id, v.artifact_uri) for v in versions] == [
        ("1", model_dirs[0]),
        ("2", model_dirs[1]),
    ]
    assert vertex.uploads[0]["parent_model"] is None
    assert vertex.uploads[1]["parent_model"] == versions[0].resource_name
    assert vertex.uploads[1]["is_default_version"] is True
    labels = [v.labels[FINGERPRINT_LABEL] for v in versions]
    assert labels[0] != labels[1] and all(
        re.fullmatch(r"[0-9a-f]{1,63}", label) for label in labels
    )


def test_a_model_the_registry_has_is_not_uploaded_again(tmp_path):
    vertex = FakeVertex()
    model_dir = saved_model_dir(tmp_path, 1)
    register(model_dir, vertex)
    again = register(model_dir, vertex)
    assert not again.newly_registered
    assert (again.model.resource_name, again.model.version_id) == ("models/1", "1")
    assert len(vertex.uploads) == 1


def test_an_upload_that_failed_is_retried_by_the_next_run(tmp_path):
    vertex = FakeVertex()
    model_dir = saved_model_dir(tmp_path, 1)
    vertex.fail_once.add("upload")
    with pytest.raises(ConnectionError):
        register(model_dir, vertex)
    assert vertex.versions("digits-cnn") == []
    retried = register(model_dir, vertex)
    assert retried.newly_registered
    assert [v.artifact_uri for v in vertex.versions("digits-cnn")] == [model_dir]


def test_a_version_is_deployed_once_to_the_named_endpoint_and_a_failed_deploy_is_retried(
    tmp_path,
):
    vertex = FakeVertex()
    model_dir = saved_model_dir(tmp_path, 1)
    vertex.fail_once.add("deploy")
    with pytest.raises(ConnectionError):
        register(model_dir, vertex, endpoint_display_name="digits")
    (endpoint,) = vertex.endpoints
    assert endpoint.deployed == []
    register(model_dir, vertex, endpoint_display_name="digits")  # registered: deploys only
    register(model_dir, vertex, endpoint_display_name="digits")  # deployed: nothing to do
    assert len(vertex.uploads) == 1 and len(vertex.endpoints) == 1
    assert [(d.model, d.model_version_id) for d in endpoint.deployed] == [("models/1", "1")]


def _run_executor(monkeypatch, *, pushed: bool, already_pushed: bool) -> list:
    """Runs RegistryPusherExecutor after a filesystem push with the given outcome."""
    from common.config import load_config
    from common.tfx_api import standard_artifacts
    from components.pusher import ALREADY_PUSHED_PROPERTY, AtomicPusherExecutor
    from kubeflow import model_registry
    from kubeflow.model_registry import RegistryPusherExecutor, registry_custom_config
    from tests.kubeflow.conftest import DEPLOYMENT_CONFIGS

    def filesystem_push(self, input_dict, output_dict, exec_properties):
        (pushed_model,) = output_dict["pushed_model"]
        pushed_model.set_int_custom_property("pushed", int(pushed))
        pushed_model.set_string_custom_property("pushed_destination", "gs://b/serving/17")
        pushed_model.set_int_custom_property(ALREADY_PUSHED_PROPERTY, int(already_pushed))

    registrations: list = []
    monkeypatch.setattr(AtomicPusherExecutor, "Do", filesystem_push)
    monkeypatch.setattr(
        model_registry,
        "register_model_version",
        lambda *args, **kwargs: (
            registrations.append(args)
            or model_registry.Registration(
                types.SimpleNamespace(resource_name="m", version_id="1"), True
            )
        ),
    )
    vertex = load_config(str(DEPLOYMENT_CONFIGS["tpu"])).vertex
    exec_properties = {"custom_config": json.dumps(registry_custom_config(vertex))}
    output = {"pushed_model": [standard_artifacts.PushedModel()]}
    RegistryPusherExecutor().Do({}, output, exec_properties)
    return registrations


def test_executor_asks_the_registry_about_every_pushed_model_even_one_pushed_before(monkeypatch):
    (registration,) = _run_executor(monkeypatch, pushed=True, already_pushed=False)
    model_dir, registry, project, region, _ = registration
    assert model_dir == "gs://b/serving/17"
    assert registry.model_display_name == "tpu-pipeline-digits"
    assert (project, region) == ("your-gcp-project", "us-central1")

    # The push was done by an earlier run whose upload failed: the registry decides.
    assert len(_run_executor(monkeypatch, pushed=True, already_pushed=True)) == 1
    assert _run_executor(monkeypatch, pushed=False, already_pushed=False) == []  # not blessed


def _push_through_the_registry_pusher(
    tmp_path, monkeypatch, vertex: FakeVertex, candidate: str | None = None, api=None
):
    """Runs the whole RegistryPusherExecutor (serving folder push, then registry) on `vertex`,
    for `candidate` (a SavedModel folder; by default one with only a fingerprint).

    `api` stands in for `vertex_api.send` (the requests that finish a half-done action);
    None: one that finds no registry entry, so nothing is left to finish.
    """
    import shutil

    from common.config import load_config
    from common.tfx_api import standard_artifacts
    from components.contract import pusher_sections
    from kubeflow import model_registry, vertex_api
    from kubeflow.model_registry import RegistryPusherExecutor, registry_custom_config
    from tests.kubeflow.conftest import DEPLOYMENT_CONFIGS

    monkeypatch.setattr(model_registry, "vertex_sdk", lambda: vertex)
    monkeypatch.setattr(vertex_api, "connect", lambda region: "credentials")
    monkeypatch.setattr(
        vertex_api, "send", api.send if api else lambda call, region, credentials: []
    )
    model = standard_artifacts.Model()
    model.uri = str(tmp_path / "trainer-output")
    shutil.copytree(
        candidate or saved_model_dir(tmp_path, 2), tmp_path / "trainer-output" / "Format-Serving"
    )
    blessing = standard_artifacts.ModelBlessing()
    blessing.set_int_custom_property("blessed", 1)
    pushed_model = standard_artifacts.PushedModel()
    pushed_model.uri = str(tmp_path / "pushed")
    config = load_config(str(DEPLOYMENT_CONFIGS["tpu"]))
    custom_config = {**pusher_sections(config), **registry_custom_config(config.vertex)}
    serving_dir = tmp_path / "serving"
    RegistryPusherExecutor().Do(
        {"model": [model], "model_blessing": [blessing]},
        {"pushed_model": [pushed_model]},
        {
            "push_destination": json.dumps({"filesystem": {"base_directory": str(serving_dir)}}),
            "custom_config": json.dumps(custom_config),
        },
    )
    return pushed_model, serving_dir


def test_while_a_version_is_pinned_the_registry_pusher_pushes_uploads_and_deploys_nothing(
    tmp_path, monkeypatch
):
    from components.pusher import PUSH_REFUSED_PROPERTY
    from components.serving.publish import pushed_versions
    from kubeflow.model_registry import PINNED_ALIAS

    vertex = FakeVertex()
    register(saved_model_dir(tmp_path, 1), vertex, model_display_name="tpu-pipeline-digits")
    (pinned,) = vertex.versions("tpu-pipeline-digits")
    pinned.version_aliases.append(PINNED_ALIAS)
    pinned.version_description = "pinned 2026-12-01T14:00:00+00:00 by ops@host: known good"

    pushed_model, serving_dir = _push_through_the_registry_pusher(tmp_path, monkeypatch, vertex)

    assert pushed_model.get_int_custom_property("pushed") == 0
    assert pushed_model.get_string_custom_property(PUSH_REFUSED_PROPERTY) == (
        "serving is pinned to version 1 (pinned 2026-12-01T14:00:00+00:00 by ops@host: "
        "known good); `tpu-pipeline serving unpin --vertex` to push again"
    )
    assert len(vertex.uploads) == 1 and vertex.endpoints == []
    assert pushed_versions(str(serving_dir)) == []  # the serving folder got nothing either


def test_the_registry_refuses_a_rolled_back_model_and_names_how_to_restore_it(tmp_path):
    from kubeflow.model_registry import ROLLED_BACK_LABEL, registry_refusal

    vertex = FakeVertex()
    models = [saved_model_dir(tmp_path, 1), saved_model_dir(tmp_path, 2)]
    for model_dir in models:
        register(model_dir, vertex)
    rolled_back = vertex.versions("digits-cnn")[1]
    rolled_back.labels[ROLLED_BACK_LABEL] = "1"
    rolled_back.version_description = "rolled back by ops@host: wrong labels"
    registry = ModelRegistryConfig(model_display_name="digits-cnn")

    def refusal(model_dir):
        return registry_refusal(model_dir, registry, "my-project", "us-central1", vertex)

    assert refusal(models[1]) == (
        "this model was rolled back as version 2 (rolled back by ops@host: wrong labels); "
        "`tpu-pipeline serving restore 2 --vertex` to serve it again"
    )
    assert refusal(models[0]) is None  # in place: registered already, not refused
    assert refusal(saved_model_dir(tmp_path, 3)) is None  # a new model


def _servable_candidate(tmp_path, broken: dict[str, str] | None = None) -> str:
    """A SavedModel with its warmup requests, as the Trainer exports it."""
    from components.serving.warmup import write_warmup_requests
    from tests.components.serving.served_models import DIGITS, save_model, write_eval_split

    model_dir = save_model(tmp_path / "candidate", broken)
    write_warmup_requests(model_dir, write_eval_split(tmp_path / "eval"), DIGITS)
    return model_dir


def test_a_model_the_serving_folder_already_held_is_checked_before_its_upload(
    tmp_path, monkeypatch
):
    # Published to the serving folder without a check (by hand, or by a run before the check
    # existed): the registry Pusher recognises the push as done, but must not upload it unchecked.
    from components.serving.publish import push_model_version
    from components.serving.server_check import ServingCheckError

    monkeypatch.setenv("PATH", str(tmp_path))  # the Python model server
    candidate = _servable_candidate(tmp_path, {"pixels": "wrong_shape"})
    push_model_version(candidate, str(tmp_path / "serving"))
    vertex = FakeVertex()
    with pytest.raises(
        ServingCheckError,
        match=r"^signature 'pixels': answered shape \[8, 9\].* \(checked with model_server\.py\)$",
    ):
        _push_through_the_registry_pusher(tmp_path, monkeypatch, vertex, candidate)
    assert vertex.uploads == [] and vertex.endpoints == []


def test_the_registry_pusher_checks_a_new_model_once_and_records_which_server(
    tmp_path, monkeypatch
):
    from components import pusher
    from components.pusher import SERVING_CHECK_PROPERTY, SERVING_CHECK_SERVER_PROPERTY

    monkeypatch.setenv("PATH", str(tmp_path))
    checked: list[str] = []
    check = pusher.check_model
    monkeypatch.setattr(
        pusher,
        "check_model",
        lambda model_dir, *args: checked.append(model_dir) or check(model_dir, *args),
    )
    vertex = FakeVertex()
    pushed_model, serving_dir = _push_through_the_registry_pusher(
        tmp_path, monkeypatch, vertex, _servable_candidate(tmp_path)
    )
    assert len(checked) == 1  # the push checked it; the upload of the same model needs no second
    (upload,) = vertex.uploads
    assert upload["artifact_uri"].startswith(str(serving_dir))
    assert pushed_model.get_string_custom_property(SERVING_CHECK_PROPERTY).startswith("passed (")
    assert pushed_model.get_string_custom_property(SERVING_CHECK_SERVER_PROPERTY) == (
        "model_server.py"
    )


def test_a_pin_landing_between_the_check_and_the_upload_keeps_default_on_the_pinned_version(
    tmp_path, monkeypatch
):
    from components.pusher import PUSH_REFUSED_PROPERTY
    from kubeflow.model_registry import PINNED_ALIAS, ROLLED_BACK_LABEL

    vertex = FakeVertex()
    register(saved_model_dir(tmp_path, 1), vertex, model_display_name="tpu-pipeline-digits")
    (first,) = vertex.versions("tpu-pipeline-digits")

    def pin_version_1():  # `serving pin 1 --vertex`, after the Pusher checked for a pin
        vertex.ModelRegistry(first.resource_name, None, None).add_version_aliases(
            ["default", PINNED_ALIAS], version="1"
        )

    vertex.before_upload = pin_version_1
    monkeypatch.setattr(pusher, "check_model", lambda *args: PASSED)  # a fingerprint only
    pushed_model, _ = _push_through_the_registry_pusher(tmp_path, monkeypatch, vertex)

    first, uploaded = vertex.versions("tpu-pipeline-digits")
    assert first.version_aliases == [PINNED_ALIAS, "default"]
    assert uploaded.version_aliases == [] and ROLLED_BACK_LABEL in uploaded.labels
    assert vertex.endpoints == []  # the set-aside version is not deployed
    assert pushed_model.get_int_custom_property("pushed") == 0
    assert pushed_model.get_string_custom_property(PUSH_REFUSED_PROPERTY).startswith(
        "serving was pinned to version 1 while this push uploaded version 2: "
        "`default` is back on 1 and 2 is set aside (rolled back); "
    )


def test_a_deploy_keeps_the_new_and_the_previous_version_and_undeploys_the_older_ones(
    tmp_path, monkeypatch
):
    from kubeflow.model_registry import UNDEPLOYED_PROPERTY

    vertex = FakeVertex()
    models = [saved_model_dir(tmp_path, checksum) for checksum in (1, 3, 4, 5)]
    for model_dir in models:  # versions 1 to 4, each deployed in turn
        register(model_dir, vertex, model_display_name="tpu-pipeline-digits")
    (endpoint,) = vertex.endpoints = [vertex.Endpoint.create("tpu-pipeline-digits", None, None)]
    for deployed in vertex.versions("tpu-pipeline-digits"):
        deployed.deploy(endpoint, "n1-standard-2", traffic_percentage=100)
    endpoint.deployed.append(  # another entry's model on the same endpoint: not ours
        types.SimpleNamespace(id="x1", model="models/other", model_version_id="1")
    )
    monkeypatch.setattr(pusher, "check_model", lambda *args: PASSED)  # a fingerprint only

    pushed_model, _ = _push_through_the_registry_pusher(tmp_path, monkeypatch, vertex)

    assert [(d.model, d.model_version_id) for d in endpoint.deployed] == [
        ("models/1", "4"),  # the one that served before: a rollback is a traffic change
        ("models/other", "1"),
        ("models/1", "5"),
    ]
    assert endpoint.undeployed == ["d1", "d2", "d3"]
    assert pushed_model.get_string_custom_property(UNDEPLOYED_PROPERTY) == "1,2,3"


def test_a_pinned_or_serving_version_is_never_retired_and_another_model_is_left_alone():
    from kubeflow.endpoint_traffic import deployments_to_retire

    def deployed(deployed_id, model, version_id):
        return types.SimpleNamespace(id=deployed_id, model=model, model_version_id=version_id)

    on_endpoint = [
        deployed("d1", "models/1", "1"),
        deployed("d2", "models/1@2", "2"),  # a name may end in "@<id>"
        deployed("d3", "models/1", "3"),
        deployed("d4", "models/1", "4"),
        deployed("x1", "models/9", "1"),
    ]
    traffic = {"d4": 100}

    retired = deployments_to_retire(on_endpoint, traffic, "models/1", keep={"2", "1"})
    assert [d.id for d in retired] == ["d3"]  # 4 had the traffic: kept for a fast rollback
    moved_to_serving = deployments_to_retire(on_endpoint, traffic, "models/1", keep={"4"})
    assert [d.id for d in moved_to_serving] == ["d1", "d2"]  # the newest other, 3, is kept


def test_the_registry_pusher_finishes_a_rollback_left_half_done_before_it_pushes(
    tmp_path, monkeypatch, caplog
):
    from kubeflow.model_registry import ROLLED_BACK_LABEL
    from kubeflow.registry_actions import INTENT_LABEL
    from tests.kubeflow.test_model_aliases import MODEL
    from tests.kubeflow.test_registry_baseline import (
        WITHDRAWN_BY_KEY,
        FakeMetadataVertexApi,
        registry,
    )

    # `serving rollback --vertex` moved the registry, then stopped before the metadata.
    half_done = {ROLLED_BACK_LABEL: "1", INTENT_LABEL: "rollback-1-1796133600"}
    api = FakeMetadataVertexApi(registry(("default",), (), v2=half_done))
    monkeypatch.setattr(pusher, "check_model", lambda *args: PASSED)

    pushed_model, _ = _push_through_the_registry_pusher(
        tmp_path, monkeypatch, FakeVertex(), api=api
    )

    assert api.blessing("2")[WITHDRAWN_BY_KEY] == f"{MODEL}@2"  # the baseline followed
    assert INTENT_LABEL not in api.versions["2"].labels
    assert f"{MODEL}@2: the rollback of 2026-12-01T14:00:00+00:00 was left half done" in caplog.text
    assert pushed_model.get_int_custom_property("pushed") == 1  # then the push went on


def test_the_registry_version_describes_the_model_card_the_push_wrote(tmp_path, monkeypatch):
    from components import pusher
    from components.model_card import card
    from components.model_card.write import write_model_card
    from components.pusher import AtomicPusherExecutor
    from tests.components.model_card.test_card import make_facts

    def writes_a_card(self, input_dict, custom_config, version, version_dir):
        return write_model_card(version_dir, card.model_card(make_facts(version=version)))

    monkeypatch.setattr(AtomicPusherExecutor, "_write_model_card", writes_a_card)
    monkeypatch.setattr(pusher, "check_model", lambda *args: PASSED)  # a fingerprint only
    vertex = FakeVertex()
    pushed_model, serving_dir = _push_through_the_registry_pusher(tmp_path, monkeypatch, vertex)

    (upload,) = vertex.uploads
    version_dir = pushed_model.get_string_custom_property("pushed_destination")
    description = upload["version_description"]
    assert description.startswith("cnn_bn classifying 8x8x1 images into 10 classes")
    assert "Blessed: yes, by the Evaluator (TFMA): passed every threshold." in description
    assert "accuracy 0.9700; eval examples 347" in description
    assert description.endswith(f"Model card: {version_dir}/model_card.html")
    assert len(description) <= 1000


def test_a_push_without_a_card_leaves_the_registry_description_empty(tmp_path, monkeypatch):
    from components import pusher

    monkeypatch.setattr(pusher, "check_model", lambda *args: PASSED)  # a fingerprint only
    vertex = FakeVertex()
    pushed_model, _ = _push_through_the_registry_pusher(tmp_path, monkeypatch, vertex)
    assert pushed_model.get_int_custom_property("pushed") == 1
    assert vertex.uploads[0]["version_description"] is None  # no evaluation: no card
