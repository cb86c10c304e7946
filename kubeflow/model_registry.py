"""A Pusher that also registers each pushed model in the Vertex AI Model Registry.

TFX's Vertex Pusher uploads every push as a *new* model named by the clock, so
the registry fills with unrelated one-version models. This one first pushes to
the `gs://` serving folder exactly like the local Pusher (never half a version,
never the same model twice), then makes that folder a version of one registry
entry (`parent_model`), and deploys it to an endpoint when configured. The version's
description is its model card in a few lines (overview, change, blessing, accuracy) and
where the whole card is; a later pin, rollback, restore or blessing by hand replaces it
with its own note, and the card stays in the version's folder.

Whether a model is registered already is asked of the registry itself: each
version carries a label with the model's fingerprint. So an upload or a deploy
that failed is retried by the next run, even though the push itself is then
recognised as done. Nothing is uploaded that has not passed the serving check
in this run: a model the serving folder already held (a retried upload, a
version published by hand) is checked before its upload, with the same budget
and the same refusal as a new push.

Before anything is pushed, the registry is asked too, as the local Pusher asks
the serving folder (`components/serving/versions.push_refusal`): while a
version has the `pinned` alias (`tpu-pipeline serving pin --vertex`), or when
the candidate is a version rolled back before, nothing is pushed, uploaded or
deployed, and the run's push says why (`push_refused`). A pin that lands between
that check and the upload (the registry has no compare-and-set on aliases) is
found by reading the aliases again after the upload: `default` goes back to the
pinned version, the new one is labelled set aside by the pin, nothing is deployed,
and `push_refused` says so.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import posixpath
import time
from collections.abc import Callable
from typing import Any

from absl import logging

from common.config import ModelRegistryConfig, VertexConfig
from common.tfx_api import artifact_utils, executor_spec, standard_component_specs
from components.model_card.card import short_description
from components.model_card.write import CARD_HTML, read_model_card
from components.pusher import (
    MODEL_CARD_PROPERTY,
    PUSH_REFUSED_PROPERTY,
    AtomicPusher,
    AtomicPusherExecutor,
)
from components.serving.publish import model_fingerprint

REGISTRY_KEY = "vertex_model_registry"
# Label keys and values allow lowercase letters, digits, '_' and '-', up to 63 characters.
FINGERPRINT_LABEL = "tpu_pipeline_fingerprint"
# Set by `tpu-pipeline serving rollback --vertex` (kubeflow/model_aliases.py).
ROLLED_BACK_LABEL = "tpu_pipeline_rolled_back"
# Set by `tpu-pipeline serving pin --vertex`: an alias names one version of an entry.
PINNED_ALIAS = "pinned"
DEFAULT_ALIAS = "default"
# The registry versions a push undeployed from the endpoint (comma-separated ids).
UNDEPLOYED_PROPERTY = "undeployed"


@dataclasses.dataclass(frozen=True)
class Registration:
    """The registry version that holds a model, and whether this run uploaded it."""

    model: Any  # an aiplatform.Model pinned to its version
    newly_registered: bool
    # Why the version does not serve although it was uploaded (a pin landed meanwhile).
    refusal: str | None = None
    # The versions its deploy undeployed from the endpoint (older than the one before it).
    undeployed: tuple[str, ...] = ()


def registry_custom_config(vertex: VertexConfig) -> dict[str, Any]:
    """The Pusher's custom_config: where to register (JSON values only)."""
    return {
        REGISTRY_KEY: {
            "project": vertex.project,
            "region": vertex.region,
            **vertex.model_registry.model_dump(mode="json"),
        }
    }


def fingerprint_label(model_dir: str) -> str:
    """A label value that names the SavedModel's content (its fingerprint, hashed)."""
    return hashlib.sha256(repr(model_fingerprint(model_dir)).encode()).hexdigest()[:32]


def register_model_version(
    model_dir: str,
    registry: ModelRegistryConfig,
    project: str,
    region: str,
    aiplatform: Any,
    before_upload: Callable[[str], None] | None = None,
    version_description: str | None = None,
) -> Registration:
    """Makes `model_dir` the default version of the registry entry, unless a version has it.

    Args:
      model_dir: the pushed SavedModel folder (a `gs://` URI).
      registry: which entry, serving image and endpoint.
      project, region: where the registry lives.
      aiplatform: the `google.cloud.aiplatform` module (a stand-in in tests).
      before_upload: runs with `model_dir` only when it is about to be uploaded; what it
        raises stops the upload (the Pusher's serving check).
      version_description: the new version's description (the model card's short form).
    """
    location = dict(project=project, location=region)
    label = fingerprint_label(model_dir)
    entries = aiplatform.Model.list(
        filter=f'display_name="{registry.model_display_name}"', **location
    )
    parent = entries[0].resource_name if entries else None
    model = _version_labelled(aiplatform, parent, label, location) if parent else None
    newly_registered = model is None
    if newly_registered:
        if before_upload is not None:
            before_upload(model_dir)
        model = aiplatform.Model.upload(
            display_name=registry.model_display_name,
            artifact_uri=model_dir,
            serving_container_image_uri=registry.serving_image,
            parent_model=parent,
            is_default_version=True,
            labels={FINGERPRINT_LABEL: label},
            version_description=version_description,
            **location,
        )
        refusal = yield_to_pin(aiplatform, model, location)
        if refusal is not None:
            return Registration(model, newly_registered, refusal)
    undeployed: tuple[str, ...] = ()
    if registry.endpoint_display_name and not is_rolled_back(model.labels):
        undeployed = _deploy_unless_deployed(aiplatform, model, registry, location)
    return Registration(model, newly_registered, undeployed=undeployed)


def yield_to_pin(aiplatform: Any, model: Any, location: dict) -> str | None:
    """After an upload as `default`: when another version has the `pinned` alias, gives
    `default` back to it and labels the new version set aside; says what it did, else None.

    `serving pin --vertex` may land between `registry_refusal` and the upload, and the
    upload's `is_default_version` would then take `default` from the pinned version.
    """
    registry = aiplatform.ModelRegistry(model.resource_name, **location)
    pinned = next(
        (
            v
            for v in registry.list_versions()
            if PINNED_ALIAS in (v.version_aliases or ()) and v.version_id != model.version_id
        ),
        None,
    )
    if pinned is None:
        return None
    registry.add_version_aliases([DEFAULT_ALIAS], version=pinned.version_id)
    if not is_rolled_back(model.labels):
        _set_aside(model)
    return (
        f"serving was pinned to version {pinned.version_id} while this push uploaded version "
        f"{model.version_id}: `default` is back on {pinned.version_id} and {model.version_id} "
        "is set aside (rolled back); `tpu-pipeline serving unpin --vertex`, then "
        f"`tpu-pipeline serving restore {model.version_id} --vertex` to serve it"
    )


def _set_aside(model: Any) -> None:
    """Labels the uploaded version rolled back, stamped as `serving rollback` stamps it.

    Through UpdateModel of `<entry>@<version>`: the SDK's `Model.update` writes the
    entry's default version, which is the pinned one again by now.
    """
    from google.cloud.aiplatform_v1 import types as gca
    from google.protobuf import field_mask_pb2

    labels = {**dict(model.labels or {}), ROLLED_BACK_LABEL: str(int(time.time()))}
    model.api_client.update_model(
        model=gca.Model(name=f"{model.resource_name}@{model.version_id}", labels=labels),
        update_mask=field_mask_pb2.FieldMask(paths=["labels"]),
    )


def registry_refusal(
    model_dir: str, registry: ModelRegistryConfig, project: str, region: str, aiplatform: Any
) -> str | None:
    """Why the registry forbids pushing `model_dir` now, or None.

    A version has the `pinned` alias, or the model (by fingerprint) is a version
    rolled back: it is never served again by a later run unless a person restores it.
    """
    location = dict(project=project, location=region)
    entries = aiplatform.Model.list(
        filter=f'display_name="{registry.model_display_name}"', **location
    )
    if not entries:
        return None
    parent = entries[0].resource_name
    versions = aiplatform.ModelRegistry(parent, **location).list_versions()
    pinned = next((v for v in versions if PINNED_ALIAS in (v.version_aliases or ())), None)
    if pinned is not None:
        return (
            f"serving is pinned to version {pinned.version_id} ({pinned.version_description}); "
            "`tpu-pipeline serving unpin --vertex` to push again"
        )
    model = _version_labelled(aiplatform, parent, fingerprint_label(model_dir), location)
    if model is not None and is_rolled_back(model.labels):
        return (
            f"this model was rolled back as version {model.version_id} "
            f"({model.version_description}); "
            f"`tpu-pipeline serving restore {model.version_id} --vertex` to serve it again"
        )
    return None


def is_deployment_of(deployed: Any, model_name: str, version_id: str) -> bool:
    """Whether an endpoint's DeployedModel serves that version (its name may end in "@<id>")."""
    return (deployed.model.split("@")[0], deployed.model_version_id) == (model_name, version_id)


def is_rolled_back(labels: Any) -> bool:
    """Whether a version's labels say it was rolled back: never deployed again by a run."""
    return ROLLED_BACK_LABEL in dict(labels or {})


def _version_labelled(aiplatform: Any, parent: str, label: str, location: dict) -> Any | None:
    """The version of `parent` that carries the fingerprint `label`, if any."""
    versions = aiplatform.ModelRegistry(parent, **location).list_versions(
        filter=f'labels.{FINGERPRINT_LABEL}="{label}"'
    )
    if not versions:
        return None
    return aiplatform.Model(model_name=parent, version=versions[0].version_id, **location)


def _deploy_unless_deployed(
    aiplatform: Any, model: Any, registry: ModelRegistryConfig, location: dict
) -> tuple[str, ...]:
    """Deploys the version to the named endpoint (created once), unless it serves it already,
    then undeploys this entry's versions older than the one that served before it.

    Returns the version ids undeployed.
    """
    endpoints = aiplatform.Endpoint.list(
        filter=f'display_name="{registry.endpoint_display_name}"', **location
    )
    endpoint = (
        endpoints[0]
        if endpoints
        else aiplatform.Endpoint.create(display_name=registry.endpoint_display_name, **location)
    )
    before = endpoint.list_models()
    if any(
        is_deployment_of(deployed, model.resource_name, model.version_id) for deployed in before
    ):
        return ()
    traffic = dict(endpoint.traffic_split or {})
    model.deploy(
        endpoint=endpoint, machine_type=registry.endpoint_machine_type, traffic_percentage=100
    )
    from kubeflow.endpoint_traffic import deployments_to_retire  # it imports this module

    versions = aiplatform.ModelRegistry(model.resource_name, **location).list_versions()
    pinned = {v.version_id for v in versions if PINNED_ALIAS in (v.version_aliases or ())}
    retired = deployments_to_retire(
        before, traffic, model.resource_name, keep={model.version_id, *pinned}
    )
    for deployed in retired:
        endpoint.undeploy(deployed_model_id=deployed.id)
    return tuple(d.model_version_id for d in retired)


class RegistryPusherExecutor(AtomicPusherExecutor):
    """Pushes like `AtomicPusherExecutor`, then makes sure the registry has the pushed model."""

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
            return  # not blessed
        custom_config = json.loads(exec_properties[standard_component_specs.CUSTOM_CONFIG_KEY])
        registration = register_model_version(
            pushed_model.get_string_custom_property("pushed_destination"),
            *_registry_settings(custom_config),
            vertex_sdk(),
            # The push checked the candidate unless the serving folder already held it.
            before_upload=lambda model_dir: self.check_serving(
                model_dir, custom_config, pushed_model
            ),
            version_description=_card_description(pushed_model),
        )
        model = registration.model
        if registration.refusal is not None:
            logging.warning("Uploaded but not served: %s", registration.refusal)
            self._MarkNotPushed(pushed_model)
            pushed_model.set_string_custom_property(PUSH_REFUSED_PROPERTY, registration.refusal)
            return
        logging.info(
            "%s %s version %s",
            "Registered" if registration.newly_registered else "Already registered:",
            model.resource_name,
            model.version_id,
        )
        for version_id in registration.undeployed:
            logging.info("Undeployed %s@%s from the endpoint", model.resource_name, version_id)
        if registration.undeployed:
            pushed_model.set_string_custom_property(
                UNDEPLOYED_PROPERTY, ",".join(registration.undeployed)
            )

    def _push_refusal(
        self, model_dir: str, base_directory: str, custom_config: dict[str, Any]
    ) -> str | None:
        """The registry's reasons first (what serves on Vertex), then the serving folder's.

        An action a person left half done on the registry is finished first, so the
        push is decided from what they meant (`kubeflow/registry_actions.py`).
        """
        finish_left_over(*_registry_settings(custom_config))
        return registry_refusal(
            model_dir, *_registry_settings(custom_config), vertex_sdk()
        ) or super()._push_refusal(model_dir, base_directory, custom_config)


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


def finish_left_over(registry: ModelRegistryConfig, project: str, region: str) -> None:
    """Finishes a rollback, pin or restore a person left half done (one log line each)."""
    from kubeflow import registry_actions, vertex_api

    credentials = vertex_api.connect(region)
    registry_actions.finish_before_push(
        registry,
        project,
        region,
        lambda call: vertex_api.send(call, region, credentials),
        lambda line: logging.warning("%s", line),
    )


def vertex_sdk() -> Any:
    """The `google.cloud.aiplatform` module, imported when a push needs it (slow to import)."""
    from google.cloud import aiplatform

    return aiplatform


class RegistryPusher(AtomicPusher):
    """The atomic Pusher, plus a new Model Registry version per newly pushed model."""

    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(RegistryPusherExecutor)
