"""A Pusher that also registers each newly pushed model in the Vertex AI Model Registry.

TFX's Vertex Pusher uploads every push as a *new* model named by the clock, so
the registry fills with unrelated one-version models. This one first pushes to
the `gs://` serving folder exactly like the local Pusher (atomically, never the
same model twice), then uploads that folder as a new version of one registry
entry (`parent_model`), and deploys it to an endpoint when configured.
"""

from __future__ import annotations

import json
from typing import Any

from absl import logging

from common.config import ModelRegistryConfig, VertexConfig
from common.tfx_api import artifact_utils, executor_spec, standard_component_specs
from components.pusher import ALREADY_PUSHED_PROPERTY, AtomicPusherExecutor
from pipeline.pipeline import AtomicPusher

REGISTRY_KEY = "vertex_model_registry"


def registry_custom_config(vertex: VertexConfig) -> dict[str, Any]:
    """The Pusher's custom_config: where to register (JSON values only)."""
    return {
        REGISTRY_KEY: {
            "project": vertex.project,
            "region": vertex.region,
            **vertex.model_registry.model_dump(mode="json"),
        }
    }


def upload_model_version(
    model_dir: str, registry: ModelRegistryConfig, project: str, region: str, aiplatform: Any
) -> Any:
    """Uploads `model_dir` as the new default version of the registry entry, creating it once.

    Args:
      model_dir: the pushed SavedModel folder (a `gs://` URI).
      registry: which entry, serving image and endpoint.
      project, region: where the registry lives.
      aiplatform: the `google.cloud.aiplatform` module (a stand-in in tests).

    Returns:
      The uploaded `aiplatform.Model` version.
    """
    location = dict(project=project, location=region)
    existing = aiplatform.Model.list(
        filter=f'display_name="{registry.model_display_name}"', **location
    )
    model = aiplatform.Model.upload(
        display_name=registry.model_display_name,
        artifact_uri=model_dir,
        serving_container_image_uri=registry.serving_image,
        parent_model=existing[0].resource_name if existing else None,
        is_default_version=True,
        **location,
    )
    if registry.endpoint_display_name:
        endpoints = aiplatform.Endpoint.list(
            filter=f'display_name="{registry.endpoint_display_name}"', **location
        )
        endpoint = (
            endpoints[0]
            if endpoints
            else aiplatform.Endpoint.create(display_name=registry.endpoint_display_name, **location)
        )
        model.deploy(
            endpoint=endpoint, machine_type=registry.endpoint_machine_type, traffic_percentage=100
        )
    return model


class RegistryPusherExecutor(AtomicPusherExecutor):
    """Pushes like `AtomicPusherExecutor`, then registers a newly pushed model version."""

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
        pushed = pushed_model.get_int_custom_property("pushed") == 1
        if not pushed or pushed_model.get_int_custom_property(ALREADY_PUSHED_PROPERTY):
            return  # not blessed, or this model is registered already
        custom_config = json.loads(exec_properties[standard_component_specs.CUSTOM_CONFIG_KEY])
        settings = dict(custom_config[REGISTRY_KEY])
        project, region = settings.pop("project"), settings.pop("region")
        from google.cloud import aiplatform

        model = upload_model_version(
            pushed_model.get_string_custom_property("pushed_destination"),
            ModelRegistryConfig.model_validate(settings),
            project,
            region,
            aiplatform,
        )
        logging.info("Registered %s version %s", model.resource_name, model.version_id)


class RegistryPusher(AtomicPusher):
    """The atomic Pusher, plus a new Model Registry version per newly pushed model."""

    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(RegistryPusherExecutor)
