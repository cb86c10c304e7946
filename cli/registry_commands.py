"""`tpu-pipeline serving list|rollback|pin|unpin|restore|bless --vertex`: the Model Registry entry.

Each action is one library function (`kubeflow/registry_actions.py`) that keeps the
order of its steps (intent, registry, Vertex ML Metadata, endpoint) and finishes what
an earlier action left half done; this module parses, prints and maps errors to exit
codes. `--dry-run` prints every request (with stand-ins for what the lookups find) and
needs no network. Errors are one line naming the entry and the version.
"""

from __future__ import annotations

import argparse
import sys

from cli.vertex_commands import print_calls
from common.config import PipelineConfig


def run_registry_action(config: PipelineConfig, args: argparse.Namespace) -> int:
    """Runs one `serving` action on the registry entry (`vertex.model_registry`)."""
    from cli.console import quiet_library_warnings

    quiet_library_warnings()
    from kubeflow import registry_actions
    from kubeflow.model_aliases import RegistryActionError, find_model_call
    from kubeflow.runner import require_vertex
    from kubeflow.vertex_api import VertexUnreachableError, connect, send

    action = args.serving_action
    version, reason = getattr(args, "version", None), getattr(args, "reason", "")
    model_uri = getattr(args, "model_uri", None)
    find_model_call(config)  # a config without a registry entry is a config error first
    region = require_vertex(config).region
    try:
        if action == "bless":
            _require_model_uri(model_uri)
        if args.dry_run:
            print_calls(registry_actions.planned_calls(config, action, version, reason, model_uri))
            return 0
        credentials = connect(region)
        registry = registry_actions.open_registry(
            config,
            lambda call: send(call, region, credentials),
            print,
            may_be_new=action == "bless",  # a bless uploads the entry's first version
        )
        if action == "list":
            print("\n".join(registry_actions.version_lines(registry.versions)))
        elif action == "bless":
            registry_actions.bless(registry, model_uri, reason)
        else:
            registry_actions.move(registry, action, version, reason)
        return 0
    except (VertexUnreachableError, RegistryActionError) as error:
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
