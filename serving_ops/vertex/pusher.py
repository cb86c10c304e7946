"""A Pusher that also registers each pushed model in the Vertex AI Model Registry.

TFX's Vertex Pusher uploads every push as a *new* model named by the clock, so
the registry fills with unrelated one-version models. This one makes each new model
a version of one registry entry (`parent_model`), uploaded from the candidate's own
folder as TFX's does, and deploys it to an endpoint when configured; only once the
registry accepted it does it copy the model into the `gs://` serving folder, exactly
like the local Pusher (never half a version, never the same model twice), so a
registry that refuses leaves nothing served there. A model the serving folder already
holds is registered from its version folder. The version's
description is its model card in a few lines (overview, change, blessing, accuracy) and
where the whole card is; a later pin, rollback, restore or blessing by hand replaces it
with its own note, and the card stays in the version's folder. TFX runs the executor
inside Vertex AI Pipelines by this module's path.

Whether a model is registered already is asked of the registry itself: each
version carries a label with the model's fingerprint. So an upload or a deploy
that failed is retried by the next run, even though the push itself is then
recognised as done. Nothing is uploaded that has not passed the serving check
in this run: a model the serving folder already held (a retried upload, a
version published by hand) is checked before its upload, with the same budget
and the same refusal as a new push.

The push is an actor of `serving_ops/protocol.py`, as a person's command is. Before
anything is pushed, it finishes what another actor left half done and waits (at most
`PUSH_WAIT_SECONDS`) for an action in progress; then the registry is asked, as the
local Pusher asks the serving folder (`components/serving/versions.push_refusal`):
while a version has the `pinned` alias, or when the candidate is a version rolled
back before, nothing is pushed, uploaded or deployed, and the run's push says why
(`push_refused`). Its registration claims the version that serves (or the one with
the candidate's fingerprint) and asks again under that claim, so a pin or a rollback
by the protocol cannot land between the question and the upload. The upload and the
deploy are sent once, never repeated blindly. Should a writer that ignores the
protocol pin a version meanwhile, the aliases read again after the upload say so:
`default` goes back to the pinned version, the new one is labelled set aside by the
pin, nothing is deployed, and `push_refused` says so.
"""

from __future__ import annotations

import dataclasses
import json
import posixpath
from collections.abc import Callable
from typing import Any

from absl import logging

from tpu_pipeline.common import vertex_types as gca
from tpu_pipeline.common.config import ModelRegistryConfig, VertexConfig
from tpu_pipeline.common.tfx_api import artifact_utils, executor_spec, standard_component_specs
from tpu_pipeline.common.vertex_api import ApiCall
from tpu_pipeline.components.model_card.card import short_description
from tpu_pipeline.components.model_card.write import CARD_HTML, read_model_card
from tpu_pipeline.components.pusher import (
    MODEL_CARD_PROPERTY,
    AtomicPusher,
    AtomicPusherExecutor,
    PushRefused,
)
from tpu_pipeline.components.serving.publish import PushResult
from tpu_pipeline.serving_ops import protocol
from tpu_pipeline.serving_ops.protocol import Operation, Owner
from tpu_pipeline.serving_ops.vertex import actions, aliases, endpoint
from tpu_pipeline.serving_ops.vertex.entry import (  # noqa: F401 (the labels and aliases it reads, by name)
    DEFAULT_ALIAS,
    FINGERPRINT_LABEL,
    PINNED_ALIAS,
    ROLLED_BACK_LABEL,
    LabelChange,
    Registry,
    fingerprint_label,
    is_rolled_back,
)
from tpu_pipeline.serving_ops.vertex.intents import NEW, NONE, Intent
from tpu_pipeline.serving_ops.vertex.transport import Transport

REGISTRY_KEY = "vertex_model_registry"
# The registry versions a push undeployed from the endpoint (comma-separated ids).
UNDEPLOYED_PROPERTY = "undeployed"
# How long a push waits for a person's action in progress on the registry: longer than a
# lease, so an action whose process died is finished rather than waited for in vain.
PUSH_WAIT_SECONDS = 900.0

Say = Callable[[str], None]


@dataclasses.dataclass(frozen=True)
class Registration:
    """The registry version that holds a model, and whether this run uploaded it."""

    model: gca.Model | None  # the version (its entry's `name` and its `version_id`)
    newly_registered: bool
    # Why the version does not serve although it was uploaded, or why nothing was
    # registered: a pin stands, or the model was rolled back.
    refusal: str | None = None
    # The versions its deploy undeployed from the endpoint (older than the one before it).
    undeployed: tuple[str, ...] = ()


class _PushRefused(Exception):
    """The registry forbids the push now (a pin, a rolled-back model): why, in one line."""


def registry_custom_config(vertex: VertexConfig) -> dict[str, Any]:
    """The Pusher's custom_config: where to register (JSON values only)."""
    return {
        REGISTRY_KEY: {
            "project": vertex.project,
            "region": vertex.region,
            **vertex.model_registry.model_dump(mode="json"),
        }
    }


def open_entry(
    settings: ModelRegistryConfig, project: str, region: str, send: Transport, say: Say
) -> Registry:
    """The entry named `settings.model_display_name`, with its versions (none if there is none)."""
    location = f"projects/{project}/locations/{region}"
    found = list(send(aliases.model_lookup_call(location, settings.model_display_name)))
    registry = Registry(None, location, settings, send, say, None, [])
    if found:
        registry.model_name = found[0].name
        registry.reread()
    return registry


def settle_before_push(
    settings: ModelRegistryConfig,
    project: str,
    region: str,
    send: Transport,
    say: Say,
    owner: Owner | None = None,
    wait_seconds: float | None = PUSH_WAIT_SECONDS,
) -> Registry:
    """The Pusher's turn: finishes what another actor left half done, waits for one at work.

    Returns the entry as it is then.

    Raises:
      RegistryActionError: a step failed again (the push waits for it).
      protocol.Busy: an action stayed in progress longer than `wait_seconds`.
    """
    registry = open_entry(settings, project, region, send, say)
    if registry.model_name is not None:
        patience = actions.patience_for(registry, wait_seconds)
        patience.start()
        protocol.settle_left_over(actions.store_for(registry, owner), patience, say)
    return registry


def registry_refusal(model_dir: str, registry: Registry) -> str | None:
    """Why the registry forbids pushing `model_dir` now, or None.

    A version has the `pinned` alias, or the model (by fingerprint) is a version
    rolled back: it is never served again by a later run unless a person restores it.
    """
    pinned = aliases.pinned_version(registry.versions)
    if pinned is not None:
        return (
            f"serving is pinned to version {pinned.version_id} ({pinned.version_description}); "
            "`tpu-pipeline serving unpin --vertex` to push again"
        )
    model = _version_labelled(registry, fingerprint_label(model_dir))
    if model is not None and is_rolled_back(model.labels):
        return (
            f"this model was rolled back as version {model.version_id} "
            f"({model.version_description}); "
            f"`tpu-pipeline serving restore {model.version_id} --vertex` to serve it again"
        )
    return None


def register_model_version(
    model_dir: str,
    settings: ModelRegistryConfig,
    project: str,
    region: str,
    send: Transport,
    before_upload: Callable[[str], None] | None = None,
    version_description: str | None = None,
    say: Say = lambda line: logging.warning("%s", line),
    owner: Owner | None = None,
    wait_seconds: float | None = PUSH_WAIT_SECONDS,
) -> Registration:
    """Makes `model_dir` the default version of the registry entry, unless a version has it.

    Args:
      model_dir: the pushed SavedModel folder (a `gs://` URI).
      settings: which entry, serving image and endpoint.
      project, region: where the registry lives.
      send: the transport to Vertex AI (a test's server, in tests).
      before_upload: runs with `model_dir` only when it is about to be uploaded; what it
        raises stops the upload (the Pusher's serving check).
      version_description: the new version's description (the model card's short form).
      say: told what the protocol does (an action finished, a wait).
      owner: this actor (default: this process).
      wait_seconds: how long to wait for another actor's action in progress.

    Raises:
      RegistryActionError: a step failed (what is half done is finished by the next actor).
      protocol.Busy: another actor's action stayed in progress longer than the wait.
    """
    registry = settle_before_push(settings, project, region, send, say, owner, wait_seconds)
    label = fingerprint_label(model_dir)
    uploader = _Uploader(registry, model_dir, label, before_upload, version_description)
    if not registry.versions:  # the entry's first version: nothing to claim yet
        return uploader.first_version()
    store = actions.store_for(registry, owner)
    patience = actions.patience_for(registry, wait_seconds)

    def plan() -> Operation[Intent]:
        refusal = registry_refusal(model_dir, registry)
        if refusal is not None:
            raise _PushRefused(refusal)
        labelled = _version_labelled(registry, label)
        if labelled is not None:  # registered by an earlier run: deployed here if need be
            intent = store.new_intent("push", NONE, labelled.version_id)
            uploader.result = Registration(labelled, newly_registered=False)
            keep = actions.keeping(store, intent, registry)
            steps = [uploader.deploy_step(keep)]
        else:
            serving = aliases.served_version(registry.versions) or registry.versions[-1]
            intent = store.new_intent("push", NEW, serving.version_id)
            keep = actions.keeping(store, intent, registry)  # renewed while it waits
            steps = [uploader.upload_step(keep), uploader.deploy_step(keep)]

        def confirm() -> bool:  # asked again under the claim: nothing can land meanwhile
            again = _version_labelled(registry, label)
            unchanged = (again and again.version_id) == (labelled and labelled.version_id)
            return unchanged and registry_refusal(model_dir, registry) is None

        return Operation(intent, steps, confirm)

    try:
        protocol.carry_out(store, plan, patience, say)
    except _PushRefused as refused:
        return Registration(None, newly_registered=False, refusal=str(refused))
    return uploader.result


class _Uploader:
    """The steps of one registration: upload (once), yield to a pin, deploy."""

    def __init__(
        self,
        registry: Registry,
        model_dir: str,
        label: str,
        before_upload: Callable[[str], None] | None,
        version_description: str | None,
    ):
        self.registry, self.model_dir, self.label = registry, model_dir, label
        self.before_upload, self.version_description = before_upload, version_description
        self.result: Registration | None = None

    def first_version(self) -> Registration:
        self._upload(lambda: None)
        if self.result.refusal is None:
            self._deploy(lambda: None)
        return self.result

    def upload_step(self, keep: Callable[[], None]) -> Callable[[], list[str]]:
        def step() -> list[str]:
            self._upload(keep)
            return []

        return step

    def deploy_step(self, keep: Callable[[], None]) -> Callable[[], list[str]]:
        def step() -> list[str]:
            if self.result.refusal is None:
                self._deploy(keep)
            return []

        return step

    def _upload(self, keep: Callable[[], None]) -> None:
        registry, settings = self.registry, self.registry.settings
        if self.before_upload is not None:
            self.before_upload(self.model_dir)
        model = gca.Model(
            display_name=settings.model_display_name,
            artifact_uri=self.model_dir,
            container_spec=gca.ModelContainerSpec(image_uri=settings.serving_image),
            labels={FINGERPRINT_LABEL: self.label},
            version_aliases=[DEFAULT_ALIAS],  # the SDK's `is_default_version=True`
            version_description=self.version_description or "",
        )
        request = gca.UploadModelRequest(
            parent=registry.location, parent_model=registry.model_name or "", model=model
        )
        operation = registry.send(ApiCall("ModelService.UploadModel", request))  # sent once
        uploaded = actions.wait_for(operation, keep)
        registry.model_name = uploaded.model
        registry.reread()
        version = registry.version(uploaded.model_version_id)
        self.result = Registration(
            version, newly_registered=True, refusal=yield_to_pin(registry, version)
        )

    def _deploy(self, keep: Callable[[], None]) -> None:
        version = self.result.model
        undeployed: tuple[str, ...] = ()
        if self.registry.settings.endpoint_display_name and not is_rolled_back(
            self.registry.read(version.version_id).labels
        ):
            undeployed = _deploy_unless_deployed(self.registry, version.version_id, keep)
        self.result = dataclasses.replace(self.result, undeployed=undeployed)


def yield_to_pin(registry: Registry, version: gca.Model) -> str | None:
    """After an upload as `default`: when another version has the `pinned` alias, gives
    `default` back to it and labels the new version set aside; says what it did, else None.

    A writer that ignores the protocol may pin between the registration's question and its
    upload, and the upload's `default` would then take it from the pinned version.
    """
    pinned = next(
        (
            v
            for v in registry.reread()
            if PINNED_ALIAS in v.version_aliases and v.version_id != version.version_id
        ),
        None,
    )
    if pinned is None:
        return None
    registry.merge_aliases(pinned.version_id, [DEFAULT_ALIAS])
    stamp = str(int(registry.send.clock()))  # as `serving rollback` stamps it
    registry.update(version.version_id, LabelChange(set={ROLLED_BACK_LABEL: stamp}))
    return (
        f"serving was pinned to version {pinned.version_id} while this push uploaded version "
        f"{version.version_id}: `default` is back on {pinned.version_id} and "
        f"{version.version_id} is set aside (rolled back); `tpu-pipeline serving unpin "
        f"--vertex`, then `tpu-pipeline serving restore {version.version_id} --vertex` to serve it"
    )


def _version_labelled(registry: Registry, label: str) -> gca.Model | None:
    """The version that carries the fingerprint `label`, if any (as the registry filters)."""
    if registry.model_name is None:
        return None
    request = gca.ListModelVersionsRequest(
        name=registry.model_name, filter=f'labels.{FINGERPRINT_LABEL}="{label}"'
    )
    found = list(registry.send(ApiCall("ModelService.ListModelVersions", request)))
    return found[0] if found else None


def _deploy_unless_deployed(
    registry: Registry, version_id: str, keep: Callable[[], None]
) -> tuple[str, ...]:
    """Deploys the version to the named endpoint (created once), unless it serves it already,
    then undeploys this entry's versions older than the one that served before it.

    Returns the version ids undeployed.
    """
    settings, name = registry.settings, registry.model_name
    found = list(registry.send(endpoint.find_endpoint_call(registry.location, settings)))
    if found:
        target = found[0]
    else:
        request = gca.CreateEndpointRequest(
            parent=registry.location,
            endpoint=gca.Endpoint(display_name=settings.endpoint_display_name),
        )
        target = actions.wait_for(
            registry.send(ApiCall("EndpointService.CreateEndpoint", request)), keep
        )
    before = list(target.deployed_models)
    if any(endpoint.is_deployment_of(d, name, version_id) for d in before):
        return ()
    traffic = dict(target.traffic_split)
    actions.wait_for(
        registry.send(endpoint.deploy_call(target.name, name, version_id, settings)), keep
    )
    pinned = {v.version_id for v in registry.reread() if PINNED_ALIAS in v.version_aliases}
    retired = endpoint.deployments_to_retire(before, traffic, name, keep={version_id, *pinned})
    for deployed in retired:
        actions.wait_for(registry.send(endpoint.undeploy_call(target.name, deployed.id)), keep)
    return tuple(d.model_version_id for d in retired)


class RegistryPusherExecutor(AtomicPusherExecutor):
    """Pushes like `AtomicPusherExecutor`, registering a new model before it is copied."""

    # The registration `_before_copy` made in this execution (TFX makes an executor per one).
    _registration: Registration | None = None

    def Do(  # noqa: N802 (TFX's executor interface)
        self,
        input_dict: dict[str, list[Any]],
        output_dict: dict[str, list[Any]],
        exec_properties: dict[str, Any],
    ) -> None:
        super().Do(input_dict, output_dict, exec_properties)
        pushed_model = artifact_utils.get_single_instance(
            output_dict[standard_component_specs.PUSHED_MODEL_KEY]
        )
        if pushed_model.get_int_custom_property("pushed") != 1:
            return  # not blessed, or refused
        registration = self._registration
        if registration is None:  # the serving folder held the model: the registry decides
            custom_config = json.loads(exec_properties[standard_component_specs.CUSTOM_CONFIG_KEY])
            registration = self._register(
                pushed_model.get_string_custom_property("pushed_destination"),
                custom_config,
                pushed_model,
                _card_description(pushed_model),
            )
            if registration.refusal is not None:
                self._mark_refused(pushed_model, registration.refusal)
                return
        model = registration.model
        logging.info(
            "%s %s version %s",
            "Registered" if registration.newly_registered else "Already registered:",
            model.name,
            model.version_id,
        )
        for version_id in registration.undeployed:
            logging.info("Undeployed %s@%s from the endpoint", model.name, version_id)
        if registration.undeployed:
            pushed_model.set_string_custom_property(
                UNDEPLOYED_PROPERTY, ",".join(registration.undeployed)
            )

    def _before_copy(
        self,
        input_dict: dict[str, list[Any]],
        custom_config: dict[str, Any],
        pushed_model: Any,
        target: PushResult,
    ) -> None:
        """Registers the candidate itself before anything is copied into the serving folder.

        The registry may still refuse here (a pin landed since the push was decided): the
        version is then not copied, so a refusal leaves nothing served. The registry's
        version serves from the candidate's own folder (as TFX's Vertex Pusher registers
        it), which the serving folder's copy does not replace; its description names the
        card the copy will hold.
        """
        made = self._model_card(input_dict, custom_config, target.version, target.version_dir)
        card_html = posixpath.join(target.version_dir, CARD_HTML)
        registration = self._register(
            self.GetModelPath(input_dict),
            custom_config,
            pushed_model,
            short_description(made, card_html) if made is not None else None,
        )
        if registration.refusal is not None:
            raise PushRefused(registration.refusal)
        self._registration = registration

    def _register(
        self,
        model_dir: str,
        custom_config: dict[str, Any],
        pushed_model: Any,
        description: str | None,
    ) -> Registration:
        settings, project, region = _registry_settings(custom_config)
        return register_model_version(
            model_dir,
            settings,
            project,
            region,
            vertex_transport(region),
            # The push checked the candidate unless the serving folder already held it.
            before_upload=lambda model_dir: self.check_serving(
                model_dir, custom_config, pushed_model
            ),
            version_description=description,
        )

    def _push_refusal(
        self, model_dir: str, base_directory: str, custom_config: dict[str, Any]
    ) -> str | None:
        """The registry's reasons first (what serves on Vertex), then the serving folder's.

        What a person's action left half done on the registry is finished first, and one
        in progress waited for, so the push is decided from what they meant.
        """
        settings, project, region = _registry_settings(custom_config)
        registry = settle_before_push(
            settings, project, region, vertex_transport(region), _log_warning
        )
        return registry_refusal(model_dir, registry) or super()._push_refusal(
            model_dir, base_directory, custom_config
        )


def _log_warning(line: str) -> None:
    logging.warning("%s", line)


def _card_description(pushed_model: Any) -> str | None:
    """The pushed version's model card in a few lines, for its registry version; None
    when the push wrote no card (the PushedModel then names none)."""
    card_path = pushed_model.get_string_custom_property(MODEL_CARD_PROPERTY)
    if not card_path:
        return None
    made = read_model_card(posixpath.dirname(card_path))
    if made is None:
        return None
    return short_description(made, posixpath.join(posixpath.dirname(card_path), CARD_HTML))


def _registry_settings(custom_config: dict[str, Any]) -> tuple[ModelRegistryConfig, str, str]:
    """The registry section of the Pusher's custom_config: (registry, project, region)."""
    settings = dict(custom_config[REGISTRY_KEY])
    project, region = settings.pop("project"), settings.pop("region")
    return ModelRegistryConfig.model_validate(settings), project, region


def vertex_transport(region: str) -> Transport:
    """The transport to Vertex AI in `region`, once credentials and the network are there."""
    from tpu_pipeline.common import vertex_api

    credentials = vertex_api.connect(region)
    return Transport(lambda call: vertex_api.send(call, region, credentials))


class RegistryPusher(AtomicPusher):
    """The atomic Pusher, plus a new Model Registry version per newly pushed model."""

    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(RegistryPusherExecutor)
