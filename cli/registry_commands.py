"""`tpu-pipeline serving list|rollback|pin|unpin|restore|bless --vertex`: the Model Registry entry.

Each action is one library function (`serving_ops/vertex/actions.py`) that keeps the
protocol's order (intent, registry, Vertex ML Metadata, endpoint) and finishes what
another actor left half done; this module parses, prints and maps errors to exit
codes. `--dry-run` is the same action over a transport that records instead of
sending: it reads the registry (reads change nothing) and prints, as JSON, every call
the action makes in order, each marked sent (a read) or not (a change); the lines it
would print go to stderr. Errors are one line naming the entry and the version.
"""

from __future__ import annotations

import argparse
import sys

from tpu_pipeline.common.config import PipelineConfig, require_vertex


def run_registry_action(config: PipelineConfig, args: argparse.Namespace) -> int:
    """Runs one `serving` action on the registry entry (`vertex.model_registry`)."""
    from tpu_pipeline.common.vertex_api import VertexUnreachableError, connect, send
    from tpu_pipeline.serving_ops.protocol import OperationError
    from tpu_pipeline.serving_ops.vertex import actions
    from tpu_pipeline.serving_ops.vertex.aliases import find_model_call
    from tpu_pipeline.serving_ops.vertex.transport import Recorder, Transport

    action = args.serving_action
    version, reason = getattr(args, "version", None), getattr(args, "reason", "")
    model_uri = getattr(args, "model_uri", None)
    find_model_call(config)  # a config without a registry entry is a config error first
    region = require_vertex(config).region
    try:
        if action == "bless":
            _require_model_uri(model_uri)
        credentials = connect(region)

        def api(call):
            return send(call, region, credentials)

        recorder = Recorder(api) if args.dry_run else None
        say = _to_stderr if recorder else print
        registry = actions.open_registry(
            config,
            Transport(recorder or api),
            say,
            may_be_new=action == "bless",  # a bless uploads the entry's first version
        )
        patience = actions.patience_for(
            registry, getattr(args, "wait", actions.DEFAULT_WAIT_SECONDS)
        )
        if action == "list":
            for line in actions.list_versions(registry):
                say(line)
        elif action == "bless":
            actions.bless(registry, model_uri, reason, patience)
        else:
            actions.move(registry, action, version, reason, patience)
        if recorder is not None:
            print(recorder.printed())
        return 0
    except (VertexUnreachableError, OperationError) as error:
        print(f"tpu-pipeline: {error}", file=sys.stderr)
        return 1


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr)


def _require_model_uri(model_uri: str | None) -> None:
    from tpu_pipeline.serving_ops.vertex.blessing import check_model_uri
    from tpu_pipeline.serving_ops.vertex.entry import RegistryActionError

    if not model_uri:
        raise RegistryActionError(
            "serving bless --vertex: give --model-uri, the gs:// URI of the model the "
            "Evaluator refused (.../ServingPackager/served_model/<id>/Format-Serving)"
        )
    check_model_uri(model_uri)
