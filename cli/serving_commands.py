"""`tpu-pipeline serving list | rollback | pin | unpin | restore | bless`.

The serving folder is the run folder's `serving_model/` (from the same
--config/--dataset/--output-dir flags `run` takes). Folder moves live in
`components/serving/versions.py` (the Pusher honours them too), the manual
blessing in `pipeline/manual_blessing.py`, the Vertex AI Model Registry variant
(`--vertex`) in `cli/registry_commands.py`.
"""

from __future__ import annotations

import argparse
import sys

from cli.config_flags import add_config_flags, config_from_args
from common.config import BUILTIN_DATASETS, PipelineConfig

SERVING_COMMAND = "serving"
ACTIONS = ("list", "rollback", "pin", "unpin", "restore", "bless")


def add_serving_commands(commands: argparse._SubParsersAction) -> None:
    """Registers `serving` and its actions on the `tpu-pipeline` parser."""
    serving = commands.add_parser(
        SERVING_COMMAND, help="see, roll back, pin or restore served model versions; bless by hand"
    )
    actions = serving.add_subparsers(dest="serving_action", required=True)
    parsers = {
        "list": actions.add_parser("list", help="every version, which serves, and why set aside"),
        "rollback": actions.add_parser(
            "rollback", help="set the served version aside so the previous one serves"
        ),
        "pin": actions.add_parser(
            "pin", help="serve VERSION: newer versions go aside, runs push nothing until unpin"
        ),
        "unpin": actions.add_parser("unpin", help="let runs push again (set-aside versions stay)"),
        "restore": actions.add_parser("restore", help="move a set-aside VERSION back in place"),
        "bless": actions.add_parser(
            "bless", help="bless the newest model the Evaluator refused, record it, push it"
        ),
    }
    for name in ("pin", "restore"):
        parsers[name].add_argument(
            "version", metavar="VERSION", help="a version (folder name; with --vertex its id)"
        )
    for name in ("rollback", "pin"):
        parsers[name].add_argument("--reason", default="", help="why (kept in the note)")
    parsers["bless"].add_argument("--reason", required=True, help="why the Evaluator is overruled")
    parsers["bless"].add_argument(
        "--model-id", type=int, help="ML Metadata id of the Model (default: the newest)"
    )
    parsers["bless"].add_argument(
        "--model-uri",
        metavar="URI",
        help="with --vertex: the Trainer's model, gs://.../Trainer/model/<id>/Format-Serving",
    )
    for name in ACTIONS:
        parsers[name].add_argument(
            "--vertex",
            action="store_true",
            help="act on the Vertex AI Model Registry entry (vertex.model_registry) instead",
        )
        parsers[name].add_argument(
            "--dry-run", action="store_true", help="with --vertex: print the requests, send none"
        )
    for parser in parsers.values():
        add_config_flags(parser)
        parser.add_argument("--dataset", help=f"built-in dataset: {', '.join(BUILTIN_DATASETS)}")
        parser.add_argument(
            "--output-dir", metavar="DIR", help="folder holding the run folders (default: output)"
        )


def run_serving_command(args: argparse.Namespace) -> int:
    """Runs one `serving` action; returns the exit code (1, with one line, if it cannot)."""
    from components.serving.versions import ServingFolderError

    try:
        return _run_action(args)
    except ServingFolderError as error:
        print(f"tpu-pipeline: {error}", file=sys.stderr)
        return 1


def _run_action(args: argparse.Namespace) -> int:
    config = config_from_args(args, {"dataset": args.dataset, "output_dir": args.output_dir})
    if getattr(args, "vertex", False):
        from cli.registry_commands import run_registry_action

        return run_registry_action(config, args)
    from components.serving import versions

    base = str(config.serving_dir)
    action = args.serving_action
    if action in ("rollback", "pin", "unpin", "restore") and not versions.exists(base):
        raise versions.ServingFolderError(
            f"{base}: no serving folder (no model was pushed there); check --dataset, "
            "--output-dir or --config"
        )
    if action == "list":
        _print_versions(config)
    elif action == "rollback":
        rolled_back, served = versions.rollback(base, args.reason)
        print(f"rolled back {rolled_back.version} to {rolled_back.path}; serving {served.version}")
    elif action == "pin":
        moved = versions.pin(base, args.version, args.reason)
        aside = f"; set aside {', '.join(moved)}" if moved else ""
        print(f"pinned {args.version}{aside}; runs push nothing until `serving unpin`")
    elif action == "unpin":
        record = versions.unpin(base)
        print(f"unpinned {record['version']}" if record else "nothing was pinned")
    elif action == "restore":
        restored = versions.restore(base, args.version)
        print(f"restored {restored.version}{' (serving)' if restored.serving else ''}")
    else:
        return _bless(config, args)
    if action in ("rollback", "pin", "restore"):
        _follow_serving_folder(config)
    return 0


def _follow_serving_folder(config: PipelineConfig) -> None:
    """Points the next run's baseline at what serves now (see pipeline/served_baseline.py)."""
    from pipeline.served_baseline import follow_serving_folder

    changed = follow_serving_folder(
        config.metadata_path, config.full_pipeline_name, str(config.serving_dir)
    )
    for what, ids in changed.items():
        if ids:
            print(f"baseline: {what} {len(ids)} blessing(s) in ML Metadata")


def _print_versions(config: PipelineConfig) -> None:
    """A line per version: served or why set aside, and what ML Metadata knows of it."""
    from components.serving.versions import list_versions, pinned
    from pipeline.version_history import version_facts

    base = str(config.serving_dir)
    facts = version_facts(config.metadata_path, config.full_pipeline_name)
    found = list_versions(base)
    if not found:
        print(f"{base}: no versions")
    for version in found:
        if version.serving:
            state = "SERVING"
        elif version.note:
            note = version.note
            state = (
                f"set aside by {note['action']} {note['when']} by {note['who']}: {note['reason']}"
            )
        else:
            state = "in place"
        known = f"  ({facts[version.version]})" if version.version in facts else ""
        print(f"{version.version}  {state}{known}")
    record = pinned(base)
    if record:
        print(f"pinned to {record['version']} ({record['reason']}): runs push nothing")


def _bless(config: PipelineConfig, args: argparse.Namespace) -> int:
    from cli.console import quiet_library_warnings

    quiet_library_warnings()
    from cli.report_commands import write_run_report
    from pipeline.manual_blessing import bless_model
    from pipeline.report.collect import summarize_stored_run
    from pipeline.report.run_store import open_latest_run

    blessing = bless_model(
        config.metadata_path,
        config.full_pipeline_name,
        str(config.serving_dir),
        args.reason,
        args.model_id,
    )
    push = blessing.push
    how = "pushed as version" if push.newly_pushed else "already served as version"
    print(f"blessed model {blessing.model_id} by hand ({blessing.reason}); {how} {push.version}")
    summary = summarize_stored_run(
        open_latest_run(config.run_dir), list(config.dataset.class_names)
    )
    print(write_run_report(config, summary))
    print(summary.to_text())
    return 0
