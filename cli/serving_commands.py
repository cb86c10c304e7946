"""`tpu-pipeline serving list | rollback | pin | unpin | restore | bless`.

The serving folder is the run folder's `serving_model/`: RUN, or the run the same
--config/--dataset/--output-dir flags `run` takes name (cli/run_folder.py). Each
action is one call of `serving_ops/local/actions.py`, which moves the folder and
makes ML Metadata follow as one recoverable operation (`serving_ops/protocol.py`);
the Vertex AI Model Registry variant (`--vertex`) is `cli/registry_commands.py`.
Once an action has changed what serves, MLflow's registry is brought in line with
the folder when a tracker is configured (pipeline/tracking/serving_log.py): serving_ops
sits below the tracker's layer, so the command, which sits above both, calls it.
"""

from __future__ import annotations

import argparse
import logging
import pathlib
import sys

from tpu_pipeline.cli.config_flags import add_config_flags, config_from_args
from tpu_pipeline.cli.run_folder import (
    METADATA_FILE,
    add_run_argument,
    add_run_flags,
    config_for_run,
)
from tpu_pipeline.common.config import ConfigError, PipelineConfig
from tpu_pipeline.common.run_lock import DEFAULT_WAIT_SECONDS

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
    for name in ("list", "rollback", "pin", "unpin", "restore"):
        add_run_argument(parsers[name])
    for name in ("pin", "restore"):
        parsers[name].add_argument(
            "version", metavar="VERSION", help="a version (folder name; with --vertex its id)"
        )
    for name in ("rollback", "pin"):
        parsers[name].add_argument("--reason", default="", help="why (kept in the note)")
    parsers["bless"].add_argument("--reason", required=True, help="why the Evaluator is overruled")
    parsers["bless"].add_argument(
        "model",
        nargs="?",
        metavar="MODEL",
        help="the model: its folder as the report shows it "
        "(RUN/pipeline_root/ServingPackager/served_model/<id>, "
        "its Format-Serving, or a served version's folder), the run folder (its newest model), "
        "or its ML Metadata id (default: the newest model); a folder also names the run",
    )
    parsers["bless"].add_argument(
        "--model-id", type=int, help="ML Metadata id of the Model (as MODEL given as an id)"
    )
    parsers["bless"].add_argument(
        "--model-uri",
        metavar="URI",
        help="with --vertex: the model the Evaluator refused, "
        "gs://.../ServingPackager/served_model/<id>/Format-Serving",
    )
    for name in ACTIONS:
        parsers[name].add_argument(
            "--vertex",
            action="store_true",
            help="act on the Vertex AI Model Registry entry (vertex.model_registry) instead",
        )
        parsers[name].add_argument(
            "--dry-run",
            action="store_true",
            help="with --vertex: the same action, sending no change: print every call it "
            "makes, in order (reads are sent, changes are not)",
        )
    for name in ACTIONS[1:]:
        parsers[name].add_argument(
            "--wait",
            type=float,
            default=DEFAULT_WAIT_SECONDS,
            metavar="SECONDS",
            help="how long to wait for a run or another serving command using the run folder "
            "(with --vertex: for another operator's action on the registry entry; "
            f"default: {DEFAULT_WAIT_SECONDS:g}); then exit 1, nothing changed",
        )
    for parser in parsers.values():
        add_config_flags(parser)
        add_run_flags(parser, with_config=False)


def run_serving_command(args: argparse.Namespace) -> int:
    """Runs one `serving` action; returns the exit code (1, with one line, if it cannot)."""
    from tpu_pipeline.components.serving.versions import ServingFolderError
    from tpu_pipeline.serving_ops.protocol import OperationError

    try:
        return _run_action(args)
    except (ServingFolderError, OperationError) as error:
        print(f"tpu-pipeline: {error}", file=sys.stderr)
        return 1


def _run_action(args: argparse.Namespace) -> int:
    if args.vertex:  # the registry entry: no run folder needed here
        from tpu_pipeline.cli.registry_commands import run_registry_action

        flags = {"dataset": args.dataset, "output_dir": args.output_dir}
        return run_registry_action(config_from_args(args, flags), args)
    config = config_for_run(args, run=_run_of_model(args))
    _quiet_libraries()
    # Each action is one library call that keeps the order over the folder and ML Metadata.
    from tpu_pipeline.serving_ops.local import actions

    action = args.serving_action
    if action == "list":
        actions.finish_interrupted_action_if_free(config)
        _print_versions(config)
        return 0
    if action == "rollback":
        lines = actions.rollback(config, args.reason, args.wait)
    elif action == "pin":
        lines = actions.pin(config, args.version, args.reason, args.wait)
    elif action == "unpin":
        lines = actions.unpin(config, args.wait)
    elif action == "restore":
        lines = actions.restore(config, args.version, args.wait)
    else:
        model_id, model_path = _model_to_bless(args)
        lines = actions.bless(config, args.reason, model_id, args.wait, model_path=model_path)
        lines.append(_rewrite_report(config))
    for line in lines:
        print(line)
    if action != "unpin":  # unpin changes no version's place
        _record_in_tracker(config, action, getattr(args, "reason", ""))
    return 0


def _record_in_tracker(config: PipelineConfig, action: str, reason: str) -> None:
    """What serves now, in MLflow's registry too (when a tracker is configured); a tracker
    that is down or refuses is one warning line, and the serving change stands."""
    from tpu_pipeline.pipeline.tracking import track_serving_change

    tracked = track_serving_change(config, action, reason)
    for line in tracked.lines:
        print(line)
    if tracked.warning:
        print(
            f"tpu-pipeline: warning: {tracked.warning}; the serving change stands",
            file=sys.stderr,
        )


def _run_of_model(args: argparse.Namespace) -> pathlib.Path | None:
    """`serving bless MODEL`: the run folder holding the MODEL folder given (or MODEL itself)."""
    model = getattr(args, "model", None)
    if model is None or model.isdigit():
        return None
    path = pathlib.Path(model).resolve()
    return next((run for run in (path, *path.parents) if (run / METADATA_FILE).is_file()), None)


def _model_to_bless(args: argparse.Namespace) -> tuple[int | None, pathlib.Path | None]:
    """`serving bless`'s MODEL (an id or a path) or --model-id, as (id, path).

    Raises:
      ConfigError: both given.
    """
    if args.model is not None and args.model_id is not None:
        raise ConfigError("serving bless: give MODEL or --model-id, not both")
    if args.model is None:
        return args.model_id, None
    if args.model.isdigit():
        return int(args.model), None
    return None, pathlib.Path(args.model)


def _quiet_libraries() -> None:
    """MLMD's own error logs (TensorFlow's are quiet already): the command says it in one line."""
    logging.getLogger("absl").setLevel(logging.CRITICAL)


def _rewrite_report(config: PipelineConfig) -> str:
    """The newest run's report, written again so it shows the manual blessing; its line."""
    from tpu_pipeline.cli.report_commands import write_run_report
    from tpu_pipeline.pipeline.report.collect import summarize_stored_run
    from tpu_pipeline.pipeline.report.run_store import open_latest_run

    try:
        stored = open_latest_run(config.run_dir)
        summary = summarize_stored_run(stored, list(config.dataset.class_names))
    except Exception as error:  # noqa: BLE001 (the blessing stands; the report is a view of it)
        return f"report: not rewritten ({type(error).__name__}: {error})"
    return write_run_report(config, summary)


def _print_versions(config: PipelineConfig) -> None:
    """A line per version: served or why set aside, and what ML Metadata knows of it."""
    from tpu_pipeline.components.serving.versions import pinned
    from tpu_pipeline.serving_ops.local.folder import list_versions
    from tpu_pipeline.serving_ops.local.history import version_facts

    base = str(config.serving_dir)
    found = list_versions(base)
    facts = version_facts(config.metadata_path, config.full_pipeline_name, found)
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
