"""The endpoint's traffic follows the registry version that serves after a person moves it.

The registry Pusher deploys each new version to `vertex.model_registry.endpoint_display_name`
with all the traffic. When a person moves the `default` alias (serving_ops/vertex/aliases.py,
serving_ops/vertex/blessing.py), the endpoint moves too: all its traffic goes to the
version that now serves, deployed first (with `traffic_split {"0": 100}`, so the switch
happens when the deploy is done) if it is not deployed.

An endpoint bills for every deployed model, so a move keeps only what a fast rollback
needs deployed: the version that now serves, the one that served before it (moving
back is one more traffic change) and a pinned version; this entry's older deployments
are undeployed (`deployments_to_retire`, which the registry Pusher uses too).
Another model's deployments on the same endpoint are left alone.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import field_mask_pb2

from tpu_pipeline.common import vertex_types as gca
from tpu_pipeline.common.config import ModelRegistryConfig, PipelineConfig, require_vertex
from tpu_pipeline.common.vertex_api import ApiCall

# DeployModel's name for the model it is deploying, in `traffic_split`.
BEING_DEPLOYED = "0"


def is_deployment_of(deployed: Any, model_name: str, version_id: str) -> bool:
    """Whether an endpoint's DeployedModel serves that version (its name may end in "@<id>")."""
    return (deployed.model.split("@")[0], deployed.model_version_id) == (model_name, version_id)


def registry_endpoint(config: PipelineConfig) -> ModelRegistryConfig | None:
    """The registry settings when they name an endpoint; None: the alias alone serves."""
    registry = require_vertex(config).model_registry
    return registry if registry and registry.endpoint_display_name else None


def find_endpoint_call(location: str, registry: ModelRegistryConfig) -> ApiCall:
    """EndpointService.ListEndpoints for the endpoint the Pusher deploys to, in `location`."""
    request = gca.ListEndpointsRequest(
        parent=location, filter=f'display_name="{registry.endpoint_display_name}"'
    )
    return ApiCall("EndpointService.ListEndpoints", request)


def traffic_call(
    endpoint: gca.Endpoint, model_name: str, version: str, registry: ModelRegistryConfig
) -> ApiCall:
    """Sends all of `endpoint`'s traffic to `model_name@version`, deploying it if need be."""
    deployed = next(
        (d for d in endpoint.deployed_models if is_deployment_of(d, model_name, version)), None
    )
    if deployed is None:
        return deploy_call(endpoint.name, model_name, version, registry)
    return split_call(endpoint, deployed.id)


def deploy_call(
    endpoint_name: str, model_name: str, version: str, registry: ModelRegistryConfig
) -> ApiCall:
    """DeployModel of one version, as the Pusher deploys (one replica), with all the traffic."""
    deployed = gca.DeployedModel(
        model=f"{model_name}@{version}",
        dedicated_resources=gca.DedicatedResources(
            machine_spec=gca.MachineSpec(machine_type=registry.endpoint_machine_type),
            min_replica_count=1,
            max_replica_count=1,
        ),
    )
    request = gca.DeployModelRequest(
        endpoint=endpoint_name, deployed_model=deployed, traffic_split={BEING_DEPLOYED: 100}
    )
    return ApiCall("EndpointService.DeployModel", request)


def split_call(endpoint: gca.Endpoint, deployed_model_id: str) -> ApiCall:
    """UpdateEndpoint of its traffic split only: 100% to one deployed model, 0 to the others.

    Conditional on the `etag` the endpoint was listed with: a split another actor changed
    meanwhile is refused, and the caller reads the endpoint again.
    """
    changed = gca.Endpoint(
        name=endpoint.name,
        display_name=endpoint.display_name,
        traffic_split={deployed_model_id: 100},
        etag=endpoint.etag,
    )
    request = gca.UpdateEndpointRequest(
        endpoint=changed, update_mask=field_mask_pb2.FieldMask(paths=["traffic_split"])
    )
    return ApiCall("EndpointService.UpdateEndpoint", request)


def deployments_to_retire(
    deployed: Any, traffic_split: dict[str, int], model_name: str, keep: set[str]
) -> list[Any]:
    """The deployments of `model_name` to undeploy once the versions in `keep` serve.

    Kept as well: the one that had the most traffic before the move (the fast rollback),
    or, when that is a kept version, the newest other. Other models' deployments are not
    this entry's to undeploy.

    Args:
      deployed: the endpoint's DeployedModels, as listed before the move.
      traffic_split: its traffic split before the move (deployed model id -> percent).
      model_name: the registry entry's resource name.
      keep: version ids that stay deployed (the one that serves now, a pinned one).
    """
    ours = [d for d in deployed if d.model.split("@")[0] == model_name]
    others = [d for d in ours if d.model_version_id not in keep]
    busiest = max(others, key=lambda d: traffic_split.get(d.id, 0), default=None)
    if busiest is not None and traffic_split.get(busiest.id, 0) == 0:
        busiest = max(others, key=lambda d: int(d.model_version_id))
    return [d for d in others if d is not busiest]


def undeploy_call(endpoint_name: str, deployed_model_id: str) -> ApiCall:
    """UndeployModel of one deployed model (one that has no traffic)."""
    request = gca.UndeployModelRequest(endpoint=endpoint_name, deployed_model_id=deployed_model_id)
    return ApiCall("EndpointService.UndeployModel", request)


def retire_calls(
    endpoint: gca.Endpoint, model_name: str, version: str, keep: set[str]
) -> dict[str, ApiCall]:
    """UndeployModel of each deployment of `model_name` that a move to `version` leaves idle,
    by the version it serves; `keep` holds other version ids to keep (a pinned one)."""
    retired = deployments_to_retire(
        endpoint.deployed_models,
        dict(endpoint.traffic_split),
        model_name,
        keep={version, *keep},
    )
    return {d.model_version_id: undeploy_call(endpoint.name, d.id) for d in retired}
