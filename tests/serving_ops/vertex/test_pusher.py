"""Each pushed model becomes one version of one Model Registry entry, and is never missed.

The registry is `server.VertexServer`: it keeps versions with their labels and answers
label filters the way Vertex AI does, so "already registered" is decided from it, as in
production, and an upload or deploy that fails can be retried.
"""

from __future__ import annotations

import json
import os
import re
import types

import pytest
from tensorflow.core.protobuf import fingerprint_pb2

from tests.serving_ops.vertex.server import VertexServer
from tpu_pipeline.common import vertex_types as gca
from tpu_pipeline.common.config import ModelRegistryConfig
from tpu_pipeline.components import pusher
from tpu_pipeline.components.serving.publish import pushed_versions
from tpu_pipeline.components.serving.server_check import ServingCheckResult
from tpu_pipeline.serving_ops.vertex.pusher import FINGERPRINT_LABEL, register_model_version

PASSED = ServingCheckResult(("serving_default",), 0.1, 0.1, "model_server.py")


def uploads(server: VertexServer) -> list:
    """The UploadModel requests the server answered."""
    return [s.request for s in server.sent if s.method == "UploadModel"]


def deployed(server: VertexServer, display_name: str) -> list[tuple[str, str]]:
    (endpoint,) = [e for e in server.endpoints.values() if e.display_name == display_name]
    return [(d.model, d.model_version_id) for d in endpoint.deployed_models]


def saved_model_dir(tmp_path, checksum: int) -> str:
    """A folder with just the SavedModel fingerprint the registry reads."""
    folder = tmp_path / f"model-{checksum}"
    folder.mkdir()
    fingerprint = fingerprint_pb2.FingerprintDef(saved_model_checksum=checksum, checkpoint_hash=7)
    (folder / "fingerprint.pb").write_bytes(fingerprint.SerializeToString())
    return str(folder)


def register(model_dir: str, server: VertexServer, **registry):
    config = ModelRegistryConfig(**{"model_display_name": "digits-cnn", **registry})
    return register_model_version(
        model_dir, config, "my-project", "us-central1", server.transport("pusher")
    )


def test_models_become_versions_of_one_entry_each_labelled_with_its_fingerprint(tmp_path):
    server = VertexServer()
    model_dirs = [saved_model_dir(tmp_path, 1), saved_model_dir(tmp_path, 2)]
    first, second = (register(model_dir, server) for model_dir in model_dirs)
    assert first.newly_registered and second.newly_registered
    entry = server.entry_named("digits-cnn")
    versions = list(server.versions(entry).values())
    assert [(v.version_id, v.artifact_uri) for v in versions] == [
        ("1", model_dirs[0]),
        ("2", model_dirs[1]),
    ]
    first_upload, second_upload = uploads(server)
    assert first_upload.parent_model == ""
    assert second_upload.parent_model == entry
    assert list(second_upload.model.version_aliases) == ["default"]  # is_default_version
    assert server.default(entry) == "2"
    labels = [v.labels[FINGERPRINT_LABEL] for v in versions]
    assert labels[0] != labels[1] and all(
        re.fullmatch(r"[0-9a-f]{1,63}", label) for label in labels
    )


def test_a_model_the_registry_has_is_not_uploaded_again(tmp_path):
    server = VertexServer()
    model_dir = saved_model_dir(tmp_path, 1)
    register(model_dir, server)
    again = register(model_dir, server)
    assert not again.newly_registered
    assert (again.model.name, again.model.version_id) == (server.entry_named("digits-cnn"), "1")
    assert len(uploads(server)) == 1


def test_an_upload_that_failed_is_retried_by_the_next_run(tmp_path):
    server = VertexServer()
    model_dir = saved_model_dir(tmp_path, 1)
    server.fail("UploadModel", ConnectionError("upload: 503 Service Unavailable"))
    with pytest.raises(ConnectionError):
        register(model_dir, server)
    assert server.entries == {}
    retried = register(model_dir, server)
    assert retried.newly_registered
    entry = server.entry_named("digits-cnn")
    assert [v.artifact_uri for v in server.versions(entry).values()] == [model_dir]


def test_a_version_is_deployed_once_to_the_named_endpoint_and_a_failed_deploy_is_retried(
    tmp_path,
):
    server = VertexServer()
    model_dir = saved_model_dir(tmp_path, 1)
    server.fail("DeployModel", ConnectionError("deploy: 503 Service Unavailable"))
    with pytest.raises(ConnectionError):
        register(model_dir, server, endpoint_display_name="digits")
    assert deployed(server, "digits") == []
    register(model_dir, server, endpoint_display_name="digits")  # registered: deploys only
    register(model_dir, server, endpoint_display_name="digits")  # deployed: nothing to do
    assert len(uploads(server)) == 1 and len(server.endpoints) == 1
    entry = server.entry_named("digits-cnn")
    assert deployed(server, "digits") == [(entry, "1")]
    assert [s.method for s in server.sent].count("DeployModel") == 2  # the failed one, then one


def _run_executor(monkeypatch, *, pushed: bool, already_pushed: bool) -> list:
    """Runs RegistryPusherExecutor after a filesystem push with the given outcome."""
    from tests.kubeflow.conftest import DEPLOYMENT_CONFIGS
    from tpu_pipeline.common.config import load_config
    from tpu_pipeline.common.tfx_api import standard_artifacts
    from tpu_pipeline.components.pusher import ALREADY_PUSHED_PROPERTY, AtomicPusherExecutor
    from tpu_pipeline.serving_ops.vertex import pusher as model_registry
    from tpu_pipeline.serving_ops.vertex.pusher import (
        RegistryPusherExecutor,
        registry_custom_config,
    )

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
            or model_registry.Registration(types.SimpleNamespace(name="m", version_id="1"), True)
        ),
    )
    monkeypatch.setattr(model_registry, "vertex_transport", lambda region: "transport")
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
    tmp_path,
    monkeypatch,
    server: VertexServer,
    candidate: str | None = None,
    serving_dir: str | None = None,
    span_shift: list | None = None,
):
    """Runs the whole RegistryPusherExecutor (registry, then serving folder push) against
    `server`, for `candidate` (a SavedModel folder; by default one with only a fingerprint),
    into `serving_dir` (default: a local folder), with the SpanShiftGate's verdict
    `span_shift` if given."""
    import shutil

    from tests.kubeflow.conftest import DEPLOYMENT_CONFIGS
    from tpu_pipeline.common.config import load_config
    from tpu_pipeline.common.tfx_api import standard_artifacts
    from tpu_pipeline.components.contract import pusher_sections
    from tpu_pipeline.serving_ops.vertex import pusher as model_registry
    from tpu_pipeline.serving_ops.vertex.pusher import (
        RegistryPusherExecutor,
        registry_custom_config,
    )

    monkeypatch.setattr(
        model_registry, "vertex_transport", lambda region: server.transport("pusher")
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
    serving_dir = serving_dir or str(tmp_path / "serving")
    inputs = {"model": [model], "model_blessing": [blessing]}
    RegistryPusherExecutor().Do(
        {**inputs, "span_shift": span_shift} if span_shift else inputs,
        {"pushed_model": [pushed_model]},
        {
            "push_destination": json.dumps({"filesystem": {"base_directory": serving_dir}}),
            "custom_config": json.dumps(custom_config),
        },
    )
    return pushed_model, serving_dir


def test_while_a_version_is_pinned_the_registry_pusher_pushes_uploads_and_deploys_nothing(
    tmp_path, monkeypatch
):
    from tpu_pipeline.components.pusher import PUSH_REFUSED_PROPERTY
    from tpu_pipeline.serving_ops.vertex.pusher import PINNED_ALIAS

    server = VertexServer()
    register(saved_model_dir(tmp_path, 1), server, model_display_name="tpu-pipeline-digits")
    (pinned,) = server.versions(server.entry_named("tpu-pipeline-digits")).values()
    pinned.version_aliases.append(PINNED_ALIAS)
    pinned.version_description = "pinned 2026-12-01T14:00:00+00:00 by ops@host: known good"

    pushed_model, serving_dir = _push_through_the_registry_pusher(tmp_path, monkeypatch, server)

    assert pushed_model.get_int_custom_property("pushed") == 0
    assert pushed_model.get_string_custom_property(PUSH_REFUSED_PROPERTY) == (
        "serving is pinned to version 1 (pinned 2026-12-01T14:00:00+00:00 by ops@host: "
        "known good); `tpu-pipeline serving unpin --vertex` to push again"
    )
    assert len(uploads(server)) == 1 and server.endpoints == {}
    assert pushed_versions(str(serving_dir)) == []  # the serving folder got nothing either


def test_a_span_the_gate_held_back_is_neither_pushed_nor_uploaded(tmp_path, monkeypatch):
    from tpu_pipeline.common.tfx_api import standard_artifacts
    from tpu_pipeline.components.pusher import PUSH_REFUSED_PROPERTY
    from tpu_pipeline.components.serving.publish import pushed_versions

    verdict = standard_artifacts.JsonValue()
    verdict.uri = str(tmp_path / "verdict")
    verdict.value = {"checked": True, "shifted": True, "headline": "span shift: 1 of 3 moved"}
    server = VertexServer()

    pushed_model, serving_dir = _push_through_the_registry_pusher(
        tmp_path, monkeypatch, server, span_shift=[verdict]
    )

    assert pushed_model.get_int_custom_property("pushed") == 0
    assert "drift.block_push" in pushed_model.get_string_custom_property(PUSH_REFUSED_PROPERTY)
    assert server.sent == []  # the registry was not even asked: no upload, no deploy
    assert pushed_versions(str(serving_dir)) == []


def test_the_registry_refuses_a_rolled_back_model_and_names_how_to_restore_it(tmp_path):
    from tpu_pipeline.serving_ops.vertex.pusher import (
        ROLLED_BACK_LABEL,
        open_entry,
        registry_refusal,
    )

    server = VertexServer()
    models = [saved_model_dir(tmp_path, 1), saved_model_dir(tmp_path, 2)]
    for model_dir in models:
        register(model_dir, server)
    rolled_back = server.version("2", server.entry_named("digits-cnn"))
    rolled_back.labels[ROLLED_BACK_LABEL] = "1"
    rolled_back.version_description = "rolled back by ops@host: wrong labels"
    settings = ModelRegistryConfig(model_display_name="digits-cnn")

    def refusal(model_dir):
        entry = open_entry(settings, "my-project", "us-central1", server.transport(), print)
        return registry_refusal(model_dir, entry)

    assert refusal(models[1]) == (
        "this model was rolled back as version 2 (rolled back by ops@host: wrong labels); "
        "`tpu-pipeline serving restore 2 --vertex` to serve it again"
    )
    assert refusal(models[0]) is None  # in place: registered already, not refused
    assert refusal(saved_model_dir(tmp_path, 3)) is None  # a new model


def _servable_candidate(tmp_path, broken: dict[str, str] | None = None) -> str:
    """A SavedModel with its warmup requests, as the ServingPackager makes it."""
    from tests.components.serving.served_models import DIGITS, save_model, write_eval_split
    from tpu_pipeline.components.serving.warmup import write_warmup_requests

    model_dir = save_model(tmp_path / "candidate", broken)
    write_warmup_requests(model_dir, write_eval_split(tmp_path / "eval"), DIGITS)
    return model_dir


def test_a_model_the_serving_folder_already_held_is_checked_before_its_upload(
    tmp_path, monkeypatch
):
    # Published to the serving folder without a check (by hand, or by a run before the check
    # existed): the registry Pusher recognises the push as done, but must not upload it unchecked.
    from tpu_pipeline.components.serving.publish import push_model_version
    from tpu_pipeline.components.serving.server_check import ServingCheckError

    monkeypatch.setenv("PATH", str(tmp_path))  # the Python model server
    candidate = _servable_candidate(tmp_path, {"pixels": "wrong_shape"})
    push_model_version(candidate, str(tmp_path / "serving"))
    server = VertexServer()
    with pytest.raises(
        ServingCheckError,
        match=r"^signature 'pixels': answered shape \[8, 9\].* \(checked with model_server\.py\)$",
    ):
        _push_through_the_registry_pusher(tmp_path, monkeypatch, server, candidate)
    assert uploads(server) == [] and server.endpoints == {}


def test_the_registry_pusher_checks_a_new_model_once_and_records_which_server(
    tmp_path, monkeypatch
):
    from tpu_pipeline.components import pusher
    from tpu_pipeline.components.pusher import SERVING_CHECK_PROPERTY, SERVING_CHECK_SERVER_PROPERTY

    monkeypatch.setenv("PATH", str(tmp_path))
    checked: list[str] = []
    check = pusher.check_model
    monkeypatch.setattr(
        pusher,
        "check_model",
        lambda model_dir, *args: checked.append(model_dir) or check(model_dir, *args),
    )
    server = VertexServer()
    pushed_model, serving_dir = _push_through_the_registry_pusher(
        tmp_path, monkeypatch, server, _servable_candidate(tmp_path)
    )
    assert len(checked) == 1  # the push checked it; the upload of the same model needs no second
    (upload,) = uploads(server)
    # Registered before the copy, from the candidate's own folder (as TFX's Vertex Pusher does).
    assert upload.model.artifact_uri == str(tmp_path / "trainer-output" / "Format-Serving")
    assert pushed_model.get_string_custom_property("pushed_destination").startswith(serving_dir)
    assert pushed_model.get_string_custom_property(SERVING_CHECK_PROPERTY).startswith("passed (")
    assert pushed_model.get_string_custom_property(SERVING_CHECK_SERVER_PROPERTY) == (
        "model_server.py"
    )


def test_a_pin_landing_between_the_check_and_the_upload_keeps_default_on_the_pinned_version(
    tmp_path, monkeypatch
):
    # A writer that ignores the protocol (the console, an older tool) pins version 1 after
    # the Pusher checked for a pin: the aliases read again after the upload say so.
    from tests.serving_ops.vertex.server import MODEL
    from tpu_pipeline.components.pusher import PUSH_REFUSED_PROPERTY
    from tpu_pipeline.serving_ops.vertex.pusher import PINNED_ALIAS, ROLLED_BACK_LABEL

    server = VertexServer()
    server.entry(("default",), metadata=False)

    def pin_version_1(sent):
        if sent.method == "UploadModel":
            server.hooks.clear()
            server.handle("console", aliases_call(MODEL, "1", ["default", PINNED_ALIAS]))

    from tpu_pipeline.serving_ops.vertex.entry import aliases_call

    server.hooks.append(pin_version_1)
    monkeypatch.setattr(pusher, "check_model", lambda *args: PASSED)  # a fingerprint only
    pushed_model, serving_dir = _push_through_the_registry_pusher(tmp_path, monkeypatch, server)

    first, uploaded = server.versions().values()
    assert first.version_aliases == [PINNED_ALIAS, "default"]
    assert uploaded.version_aliases == [] and ROLLED_BACK_LABEL in uploaded.labels
    assert server.endpoints == {}  # the set-aside version is not deployed
    assert pushed_model.get_int_custom_property("pushed") == 0
    assert pushed_model.get_string_custom_property(PUSH_REFUSED_PROPERTY).startswith(
        "serving was pinned to version 1 while this push uploaded version 2: "
        "`default` is back on 1 and 2 is set aside (rolled back); "
    )
    # The refused model was not copied into the serving folder: no version folder at all.
    assert [name for name in os.listdir(serving_dir) if name.isdigit()] == []


def test_a_deploy_keeps_the_new_and_the_previous_version_and_undeploys_the_older_ones(
    tmp_path, monkeypatch
):
    from tests.serving_ops.vertex.server import MODEL
    from tpu_pipeline.serving_ops.vertex.pusher import UNDEPLOYED_PROPERTY

    server = VertexServer()
    server.entry((), (), (), ("default",), metadata=False)  # versions 1 to 4
    endpoint = server.endpoint(("d1", "1"), ("d2", "2"), ("d3", "3"), ("d4", "4"))  # 4 serves
    endpoint.deployed_models.append(  # another entry's model on the same endpoint: not ours
        gca.DeployedModel(id="x1", model="models/other", model_version_id="1")
    )
    monkeypatch.setattr(pusher, "check_model", lambda *args: PASSED)  # a fingerprint only

    pushed_model, _ = _push_through_the_registry_pusher(tmp_path, monkeypatch, server)

    assert deployed(server, "tpu-pipeline-digits") == [
        (MODEL, "4"),  # the one that served before: a rollback is a traffic change
        ("models/other", "1"),
        (MODEL, "5"),
    ]
    undeployed = [s.request.deployed_model_id for s in server.sent if s.method == "UndeployModel"]
    assert undeployed == ["d1", "d2", "d3"]
    assert pushed_model.get_string_custom_property(UNDEPLOYED_PROPERTY) == "1,2,3"


def test_a_pinned_or_serving_version_is_never_retired_and_another_model_is_left_alone():
    from tpu_pipeline.serving_ops.vertex.endpoint import deployments_to_retire

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
    from tests.serving_ops.vertex.server import MODEL
    from tpu_pipeline.serving_ops.vertex.actions import INTENT_LABEL
    from tpu_pipeline.serving_ops.vertex.baseline import WITHDRAWN_BY_KEY
    from tpu_pipeline.serving_ops.vertex.pusher import ROLLED_BACK_LABEL

    # `serving rollback --vertex` moved the registry, then stopped before the metadata
    # (an intent written before intents had owners and leases: its lease has long ended).
    server = VertexServer()
    half_done = {ROLLED_BACK_LABEL: "1", INTENT_LABEL: "rollback-1-1796133600"}
    server.entry(("default",), (), v2=half_done)
    server.now += 7 * 24 * 3600
    monkeypatch.setattr(pusher, "check_model", lambda *args: PASSED)

    pushed_model, _ = _push_through_the_registry_pusher(tmp_path, monkeypatch, server)

    assert server.blessing("2")[WITHDRAWN_BY_KEY] == f"{MODEL}@2"  # the baseline followed
    assert INTENT_LABEL not in server.version("2").labels
    assert f"{MODEL}@2: the rollback of 2026-12-01T14:00:00+00:00 was left half done" in caplog.text
    assert pushed_model.get_int_custom_property("pushed") == 1  # then the push went on


def test_the_registry_version_describes_the_model_card_the_push_wrote(tmp_path, monkeypatch):
    from tests.components.model_card.test_card import make_facts
    from tpu_pipeline.components import pusher
    from tpu_pipeline.components.model_card import card
    from tpu_pipeline.components.model_card.write import read_model_card
    from tpu_pipeline.components.pusher import AtomicPusherExecutor

    def makes_a_card(self, input_dict, custom_config, version, version_dir):
        return card.model_card(make_facts(version=version))

    monkeypatch.setattr(AtomicPusherExecutor, "_model_card", makes_a_card)
    monkeypatch.setattr(pusher, "check_model", lambda *args: PASSED)  # a fingerprint only
    server = VertexServer()
    pushed_model, serving_dir = _push_through_the_registry_pusher(tmp_path, monkeypatch, server)

    (upload,) = uploads(server)
    version_dir = pushed_model.get_string_custom_property("pushed_destination")
    description = upload.model.version_description
    assert description.startswith("cnn_bn classifying 8x8x1 images into 10 classes")
    assert "Blessed: yes, by the Evaluator (TFMA): passed every threshold." in description
    assert "accuracy 0.9700; eval examples 347" in description
    assert description.endswith(f"Model card: {version_dir}/model_card.html")
    assert len(description) <= 1000
    assert read_model_card(version_dir) is not None  # the card it names is there


def test_a_push_without_a_card_leaves_the_registry_description_empty(tmp_path, monkeypatch):
    from tpu_pipeline.components import pusher

    monkeypatch.setattr(pusher, "check_model", lambda *args: PASSED)  # a fingerprint only
    server = VertexServer()
    pushed_model, _ = _push_through_the_registry_pusher(tmp_path, monkeypatch, server)
    assert pushed_model.get_int_custom_property("pushed") == 1
    assert uploads(server)[0].model.version_description == ""  # no evaluation: no card


def _gs_candidate(tmp_path) -> str:
    """A folder with a fingerprint and a saved_model.pb (what a copy to gs:// puts last)."""
    import pathlib

    folder = saved_model_dir(tmp_path, 2)
    (pathlib.Path(folder) / "saved_model.pb").write_bytes(b"graph")
    return folder


def _pin_once_checked(server: VertexServer, monkeypatch) -> None:
    """A writer that ignores the protocol pins version 1 once the Pusher's serving check ran
    (after the Pusher asked the registry, before its registration asks again)."""
    from tests.serving_ops.vertex.server import MODEL
    from tpu_pipeline.serving_ops.vertex.entry import aliases_call
    from tpu_pipeline.serving_ops.vertex.pusher import PINNED_ALIAS

    checked: list[str] = []
    monkeypatch.setattr(
        pusher, "check_model", lambda model_dir, *args: checked.append(model_dir) or PASSED
    )

    def pin_after_the_check(sent):
        if checked:
            server.hooks.clear()
            server.handle("console", aliases_call(MODEL, "1", ["default", PINNED_ALIAS]))

    server.hooks.append(pin_after_the_check)


def test_on_cloud_storage_a_registry_refusal_leaves_nothing_served(
    tmp_path, monkeypatch, gcs_bucket
):
    from tpu_pipeline.components.pusher import PUSH_REFUSED_PROPERTY

    server = VertexServer()
    server.entry(("default",), metadata=False)
    _pin_once_checked(server, monkeypatch)
    serving = f"{gcs_bucket.uri}/serving"

    pushed_model, _ = _push_through_the_registry_pusher(
        tmp_path, monkeypatch, server, _gs_candidate(tmp_path), serving
    )

    assert pushed_model.get_int_custom_property("pushed") == 0
    assert pushed_model.get_string_custom_property(PUSH_REFUSED_PROPERTY).startswith(
        "serving is pinned to version 1"
    )
    assert uploads(server) == [] and server.endpoints == {}
    # Not a version, not a claim: only the serving lock, released.
    assert list(gcs_bucket.files_under(serving)) == [".serving.lock"]
    assert json.loads(gcs_bucket.files_under(serving)[".serving.lock"])["released"] is True


def test_on_cloud_storage_an_accepted_model_is_registered_then_copied_whole(
    tmp_path, monkeypatch, gcs_bucket
):
    server = VertexServer()
    monkeypatch.setattr(pusher, "check_model", lambda *args: PASSED)  # a fingerprint only
    serving = f"{gcs_bucket.uri}/serving"

    pushed_model, _ = _push_through_the_registry_pusher(
        tmp_path, monkeypatch, server, _gs_candidate(tmp_path), serving
    )

    assert pushed_model.get_int_custom_property("pushed") == 1
    (version,) = pushed_versions(serving)
    assert pushed_model.get_string_custom_property("pushed_destination") == f"{serving}/{version}"
    (upload,) = uploads(server)
    assert upload.model.artifact_uri == str(tmp_path / "trainer-output" / "Format-Serving")
    assert sorted(gcs_bucket.files_under(serving)) == [
        ".serving.lock",
        f"{version}/fingerprint.pb",
        f"{version}/saved_model.pb",
    ]
