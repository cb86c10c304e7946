"""`tpu-pipeline report` and `tpu-pipeline tensorboard`, and the report at the end of `run`.

Both commands take a run folder (`output/tpu-pipeline-digits`) or find it from
the same --config/--dataset/--output-dir flags `run` takes. Heavy imports
happen inside the functions so `--help` stays instant.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import pathlib
import subprocess
import sys
from typing import TYPE_CHECKING

from tpu_pipeline.cli.run_folder import (
    RunFolderError,
    add_run_argument,
    add_run_flags,
    run_dir_from_args,
)

if TYPE_CHECKING:
    from tpu_pipeline.common.config import PipelineConfig
    from tpu_pipeline.pipeline.results.run_summary import RunSummary

REPORT_COMMANDS = ("report", "tensorboard")


def add_report_commands(commands: argparse._SubParsersAction) -> None:
    """Registers `report` and `tensorboard` on the CLI's subcommands."""
    report = commands.add_parser(
        "report", help="write the HTML report of the newest run in a run folder"
    )
    add_run_argument(report)
    add_run_flags(report)
    report.add_argument(
        "--output",
        type=pathlib.Path,
        metavar="DIR",
        help="folder for report.html and the PNGs (default: RUN/report)",
    )
    tensorboard = commands.add_parser(
        "tensorboard", help="print (or start) the tensorboard command for a run's Trainer logs"
    )
    add_run_argument(tensorboard)
    add_run_flags(tensorboard)
    tensorboard.add_argument(
        "--all-runs", action="store_true", help="show every Trainer run of the folder, to compare"
    )
    tensorboard.add_argument("--start", action="store_true", help="start TensorBoard now")
    tensorboard.add_argument("--port", type=int, help="TensorBoard's port (default: 6006)")


def run_report_command(args: argparse.Namespace) -> int:
    """Runs `report` or `tensorboard`; returns the exit code."""
    from tpu_pipeline.pipeline.report.run_store import RunNotFoundError

    try:
        if args.command == "report":
            from tpu_pipeline.pipeline.report import write_report

            files = write_report(run_dir_from_args(args), output_dir=args.output)
            print(f"report: {files.html}")
            return 0
        return _tensorboard(args)
    except RunNotFoundError as error:  # a folder with no run in it: as missing as no folder
        raise RunFolderError(str(error)) from None


def tensorboard_log_dirs(
    run_dir: pathlib.Path, all_runs: bool
) -> tuple[pathlib.Path, pathlib.Path | None]:
    """The newest run's Trainer log folder (or that of every Trainer run), and its trials.

    The second is the newest run's Tuner trials folder, None without a Tuner or
    with `all_runs`.

    Raises:
      RunNotFoundError: no run in the folder.
      FileNotFoundError: the newest run never reached the Trainer.
    """
    from tpu_pipeline.pipeline.report.run_store import open_latest_run
    from tpu_pipeline.pipeline.results.tuning_results import trials_dir
    from tpu_pipeline.pipeline.wiring.node_ids import NodeIds

    stored = open_latest_run(run_dir)
    model_run = stored.first_output(NodeIds.TRAINER, "model_run")
    if model_run is None:
        raise FileNotFoundError(f"the newest run in {stored.run_dir} did not reach the Trainer")
    log_dir = pathlib.Path(model_run.uri)
    if all_runs:
        return log_dir.parent, None
    tuner_results = stored.first_output(NodeIds.TUNER, "tuner_results")
    return log_dir, trials_dir(tuner_results) if tuner_results else None


def _tensorboard(args: argparse.Namespace) -> int:
    from tpu_pipeline.pipeline.report.tensorboard_logs import shell_line, tensorboard_command

    log_dir, trials = tensorboard_log_dirs(run_dir_from_args(args), args.all_runs)
    command = tensorboard_command(log_dir, args.port, trials_dir=trials)
    print(shell_line(command))
    if not args.start:
        return 0
    # TensorBoard's launcher imports pkg_resources; say so instead of a traceback.
    if importlib.util.find_spec("pkg_resources") is None:
        print(
            "tpu-pipeline: TensorBoard cannot start here: it needs setuptools (pkg_resources); "
            "install setuptools, or run the command above where TensorBoard works",
            file=sys.stderr,
        )
        return 1
    return subprocess.call([sys.executable, "-m", "tensorboard.main", *command[1:]])


def write_run_report(config: PipelineConfig, summary: RunSummary) -> str:
    """Writes the report of the run just finished; returns the line that names it.

    The run's result stands whatever happens here: a report that cannot be
    built is logged (with its traceback, in the run's log) and skipped.
    """
    from tpu_pipeline.pipeline.report import write_report

    try:
        files = write_report(config.run_dir, summary, config)
    except Exception:  # the report must never turn a finished run into a failed one
        logging.exception("Could not write the run report")
        return "report: not written (the log says why)"
    return f"report: {files.html}"
