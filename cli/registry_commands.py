"""`tpu-pipeline serving list|rollback|pin|unpin|restore --vertex`: the Model Registry entry.

The requests are decided in `kubeflow/model_aliases.py` from the entry's
versions, and the endpoint's traffic in `kubeflow/endpoint_traffic.py`;
`--dry-run` prints them (with stand-ins for what the lookups find) and needs no
network. Errors are one line naming the entry and the version.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from cli.vertex_commands import print_calls
from common.config import PipelineConfig


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
    if args.dry_run:
        print_calls(_planned(config, action, version, reason, lookup))
        return 0
    region = require_vertex(config).region
    try:
        credentials = connect(region)
        found = list(send(lookup, region, credentials))
        if not found:
            print(
                f"tpu-pipeline: no registry entry matches {lookup.request.filter}", file=sys.stderr
            )
            return 1
        model_name = found[0].name
        versions = list(send(aliases.list_versions_call(model_name), region, credentials))
        if action == "list":
            _print_versions(versions)
            return 0
        change = aliases.registry_change(action, model_name, versions, version, reason)
        for call in change.calls.values():
            send(call, region, credentials)
        print(change.summary)
        if change.serving is not None:
            _move_traffic(config, model_name, change.serving, region, credentials)
        return 0
    except (VertexUnreachableError, aliases.RegistryActionError) as error:
        print(f"tpu-pipeline: {error}", file=sys.stderr)
        return 1


def _planned(
    config: PipelineConfig, action: str, version: str | None, reason: str, lookup: Any
) -> dict[str, Any]:
    """Every request a real `action` may send, in order, with stand-ins for the lookups'."""
    from kubeflow import endpoint_traffic
    from kubeflow import model_aliases as aliases

    planned = {"lookup": lookup, "versions": aliases.list_versions_call(aliases.FOUND_MODEL)}
    if action == "list":
        return planned
    planned.update(aliases.planned_change(action, version, reason))
    serving = aliases.FOUND_PREVIOUS if action == "rollback" else version
    if action != "unpin":
        planned.update(endpoint_traffic.planned_traffic_calls(config, aliases.FOUND_MODEL, serving))
    return planned


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
