"""`tpu-pipeline serving list|rollback|pin|unpin|restore --vertex`: the Model Registry entry.

The requests are decided in `kubeflow/model_aliases.py` from the entry's
versions, and the endpoint's traffic in `kubeflow/endpoint_traffic.py`;
`--dry-run` prints them (with stand-ins for what the lookups find) and needs no
network. Before a rollback, pin or restore moves anything, Vertex ML Metadata is
made to agree with the registry as it will be (`kubeflow/registry_baseline.py`),
so the next run's baseline follows what serves; bless records its blessing there
after the upload (`kubeflow/metadata_blessing.py`). Errors are one line naming
the entry and the version.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from cli.vertex_commands import print_calls
from common.config import PipelineConfig

# The actions that set versions aside or bring them back (as `serving` does locally).
BASELINE_ACTIONS = ("rollback", "pin", "restore")


def run_registry_action(config: PipelineConfig, args: argparse.Namespace) -> int:
    """Runs one `serving` action on the registry entry (`vertex.model_registry`)."""
    from cli.console import quiet_library_warnings

    quiet_library_warnings()
    from kubeflow import model_aliases as aliases
    from kubeflow.runner import require_vertex
    from kubeflow.vertex_api import VertexUnreachableError, connect, send

    action = args.serving_action
    version, reason = getattr(args, "version", None), getattr(args, "reason", "")
    lookup = aliases.find_model_call(config)
    region = require_vertex(config).region
    try:
        if action == "bless":
            _require_model_uri(args.model_uri)
        if args.dry_run:
            print_calls(_planned(config, args, lookup))
            return 0
        credentials = connect(region)
        found = list(send(lookup, region, credentials))
        if not found and action != "bless":  # a bless uploads the entry's first version
            print(
                f"tpu-pipeline: no registry entry matches {lookup.request.filter}", file=sys.stderr
            )
            return 1
        model_name = found[0].name if found else None
        versions = (
            list(send(aliases.list_versions_call(model_name), region, credentials))
            if model_name
            else []
        )
        if action == "list":
            _print_versions(versions)
            return 0
        if action == "bless":
            return _bless(config, args, model_name, versions, credentials)
        change = aliases.registry_change(action, model_name, versions, version, reason)
        if action in BASELINE_ACTIONS:
            _follow_registry(config, model_name, versions, change, region, credentials)
        for call in change.calls.values():
            send(call, region, credentials)
        print(change.summary)
        if change.serving is not None:
            _move_traffic(config, model_name, change.serving, region, credentials)
        return 0
    except (VertexUnreachableError, aliases.RegistryActionError) as error:
        print(f"tpu-pipeline: {error}", file=sys.stderr)
        return 1


def _require_model_uri(model_uri: str | None) -> None:
    from kubeflow.model_aliases import RegistryActionError
    from kubeflow.registry_blessing import check_model_uri

    if not model_uri:
        raise RegistryActionError(
            "serving bless --vertex: give --model-uri, the gs:// URI of the Trainer's model "
            "the Evaluator refused (.../Trainer/model/<id>/Format-Serving)"
        )
    check_model_uri(model_uri)


def _bless(
    config: PipelineConfig,
    args: argparse.Namespace,
    model_name: str | None,
    versions: Sequence[Any],
    credentials: Any,
) -> int:
    """Uploads the model (or gives the version holding it `default`); the endpoint follows."""
    from kubeflow import metadata_blessing, registry_blessing
    from kubeflow.runner import require_vertex
    from kubeflow.vertex_api import UPLOAD_TIMEOUT_S, send
    from kubeflow.vertex_requests import parent

    vertex = require_vertex(config)
    change = registry_blessing.bless_change(
        vertex.model_registry,
        parent(config),
        model_name,
        versions,
        args.model_uri,
        registry_blessing.model_label(args.model_uri),
        args.reason,
    )

    def to_vertex(call: Any) -> Any:
        return send(call, vertex.region, credentials)

    place = metadata_blessing.find_place(config, args.model_uri, to_vertex)  # before moving
    results = [to_vertex(call) for call in change.calls.values()]
    serving = change.serving
    if serving is None:  # uploaded: the new version's id is known once the upload is done
        uploaded = results[-1].result(timeout=UPLOAD_TIMEOUT_S)
        model_name, serving = uploaded.model, uploaded.model_version_id
    print(f"{change.summary} as {model_name}@{serving} ({registry_blessing.BLESSED_LABEL})")
    served_uri = next(
        (v.artifact_uri for v in versions if v.version_id == serving), args.model_uri
    )  # a version uploaded now serves from the model's folder
    blessing = metadata_blessing.record_blessing(
        place, args.model_uri, served_uri, args.reason, to_vertex
    )
    print(f"baseline: recorded {blessing} in Vertex ML Metadata")
    _move_traffic(config, model_name, serving, vertex.region, credentials)
    return 0


def _planned(config: PipelineConfig, args: argparse.Namespace, lookup: Any) -> dict[str, Any]:
    """Every request a real action may send, in order, with stand-ins for the lookups'."""
    from kubeflow import endpoint_traffic, metadata_blessing, registry_baseline, registry_blessing
    from kubeflow import model_aliases as aliases
    from kubeflow.vertex_requests import parent

    action, version = args.serving_action, getattr(args, "version", None)
    planned = {"lookup": lookup, "versions": aliases.list_versions_call(aliases.FOUND_MODEL)}
    if action == "list":
        return planned
    if action == "bless":
        registry = config.vertex.model_registry
        planned.update(metadata_blessing.planned_lookups(config, args.model_uri))
        planned.update(
            registry_blessing.planned_bless(registry, parent(config), args.model_uri, args.reason)
        )
        planned.update(metadata_blessing.planned_record(config, args.model_uri, args.reason))
        version = registry_blessing.FOUND_BLESSED
    else:
        if action in BASELINE_ACTIONS:
            planned.update(
                registry_baseline.planned_baseline_calls(registry_baseline.metadata_store(config))
            )
        planned.update(aliases.planned_change(action, version, getattr(args, "reason", "")))
    serving = aliases.FOUND_PREVIOUS if action == "rollback" else version
    if action != "unpin":
        planned.update(endpoint_traffic.planned_traffic_calls(config, aliases.FOUND_MODEL, serving))
    return planned


def _follow_registry(
    config: PipelineConfig,
    model_name: str,
    versions: Sequence[Any],
    change: Any,
    region: str,
    credentials: Any,
) -> None:
    """Points the next run's baseline at what serves once `change` is sent."""
    from kubeflow import registry_baseline
    from kubeflow.vertex_api import send

    changed = registry_baseline.follow_registry(
        registry_baseline.metadata_store(config),
        model_name,
        registry_baseline.versions_after(model_name, versions, change),
        lambda call: send(call, region, credentials),
    )
    for what, names in changed.items():
        if names:
            print(f"baseline: {what} {len(names)} blessing(s) in Vertex ML Metadata")


def _move_traffic(
    config: PipelineConfig, model_name: str, version: str, region: str, credentials: Any
) -> None:
    """All of the configured endpoint's traffic to `model_name@version` (none configured: none)."""
    from kubeflow import endpoint_traffic
    from kubeflow.vertex_api import send

    registry = endpoint_traffic.registry_endpoint(config)
    if registry is None:
        return
    lookup = endpoint_traffic.find_endpoint_call(config, registry)
    endpoints = list(send(lookup, region, credentials))
    if not endpoints:
        print(f"no endpoint matches {lookup.request.filter}: only the alias moved")
        return
    endpoint = endpoints[0]
    call = endpoint_traffic.traffic_call(endpoint, model_name, version, registry)
    send(call, region, credentials)
    if call.method == "EndpointService.DeployModel":
        print(
            f"deploying {model_name}@{version} to {endpoint.name}: it takes all the traffic "
            "when the deploy is done (nothing is undeployed)"
        )
    else:
        print(f"{endpoint.name}: all traffic to {model_name}@{version} (nothing is undeployed)")


def _print_versions(versions: Sequence[Any]) -> None:
    """A line per version: its aliases, and why it is pinned or rolled back."""
    from kubeflow import model_aliases as aliases

    for found in sorted(versions, key=lambda v: int(v.version_id)):
        marks = list(found.version_aliases)
        if aliases.is_rolled_back(found.labels) or aliases.PINNED_ALIAS in marks:
            marks.append(found.version_description)
        print(f"{found.version_id}  {', '.join(marks)}")
