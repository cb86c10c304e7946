"""`tpu-pipeline runs [RUN]` and `tpu-pipeline runs [RUN] diff [A B]`: a run folder's history.

Read from the folder's ML Metadata store (pipeline/runs/) with no TensorFlow, TFX or
pydantic unless the run folder is found through a configuration file, so both answer in
well under a second. The run folder is named as for `report`: a positional RUN, or the
--config/--dataset/--output-dir flags `run` takes.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

from tpu_pipeline.cli.run_folder import (
    RUN_HELP,
    RunFolderError,
    add_run_flags,
    config_for_run,
    existing_run,
)

RUNS_COMMAND = "runs"
DIFF = "diff"
USAGE = "tpu-pipeline runs [RUN] [--config FILE] [--dataset NAME] [--output-dir DIR]\n" + (
    "       tpu-pipeline runs [RUN] diff [A B]   (default: the two newest runs)"
)
DESCRIPTION = """List a run folder's runs, newest first, from its ML Metadata store: when, which
data (span, fingerprint of the input files), what changed in the configuration since the
run before, the model, eval accuracy against its baseline, whether it was blessed and why,
and which version it served from when to when.

`runs diff [A B]` shows what differs from run A to run B (numbers as `runs` lists them,
1 the newest, or run ids; default: 2 and 1): configuration, data, metrics overall, per
class and per slice, and the eval examples that flipped from right to wrong and back."""


def add_runs_command(commands: argparse._SubParsersAction) -> None:
    """Registers `runs` on the CLI's subcommands."""
    runs = commands.add_parser(
        RUNS_COMMAND,
        help="list a run folder's runs from ML Metadata; `runs diff [A B]` compares two",
        usage=USAGE,
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_runs_arguments(runs)


def add_runs_arguments(parser: argparse.ArgumentParser) -> None:
    """The words and flags of `runs`, also parsed alone by `main`'s fast path."""
    parser.add_argument(
        "words",
        nargs="*",
        metavar="[RUN] [diff [A B]]",
        help=f"{RUN_HELP}, then `diff` and the two runs to compare",
    )
    add_run_flags(parser)


class RunsUsageError(ValueError):
    """The words name no run folder, or no runs to compare: exit 2, one line."""


def _split_words(words: list[str]) -> tuple[pathlib.Path | None, list[str] | None]:
    """(run folder or None, None for a list or the two runs to diff ([] for the newest two)).

    Raises:
      RunsUsageError: the words fit neither form.
    """
    if DIFF in words:
        at = words.index(DIFF)
        folder, refs = words[:at], words[at + 1 :]
        if len(folder) <= 1 and len(refs) in (0, 2):
            return (pathlib.Path(folder[0]) if folder else None), refs
    elif len(words) <= 1:
        return (pathlib.Path(words[0]) if words else None), None
    raise RunsUsageError(f"runs: expected {USAGE.splitlines()[1].strip()} or a run folder alone")


def _run_dir(args: argparse.Namespace, folder: pathlib.Path | None) -> pathlib.Path:
    try:
        if folder is not None:  # no pydantic: `runs RUN` answers in well under a second
            return existing_run(folder, "RUN")
        from tpu_pipeline.common.config import ConfigError

        try:
            return config_for_run(args).run_dir
        except ConfigError as error:
            raise RunFolderError(str(error)) from None
    except RunFolderError as error:
        raise RunsUsageError(str(error)) from None


def run_runs_command(args: argparse.Namespace) -> int:
    """Prints the run list, or the diff of two runs; returns the exit code: 2, saying why in
    one line, when there is no run folder there, fewer than two runs to diff, or a run number
    or id that names none; 1 when the store is damaged or locked."""
    from tpu_pipeline.common.metadata_check import DamagedMetadataError, LockedMetadataError

    try:
        return _runs(args)
    except RunsUsageError as error:
        print(f"tpu-pipeline: {error}", file=sys.stderr)
        return 2
    except (DamagedMetadataError, LockedMetadataError) as error:
        print(f"tpu-pipeline: {error}", file=sys.stderr)
        return 1


def runs_main(argv: list[str]) -> int:
    """`tpu-pipeline runs ARGS` parsed and run alone: what the console command calls for `runs`
    (cli/entry.py), before importing every other command's module."""
    parser = argparse.ArgumentParser(
        prog=f"tpu-pipeline {RUNS_COMMAND}",
        usage=USAGE,
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_runs_arguments(parser)
    return run_runs_command(parser.parse_args(argv))


def _runs(args: argparse.Namespace) -> int:
    from tpu_pipeline.pipeline.runs.history import RunFolderNotFoundError, read_history
    from tpu_pipeline.pipeline.runs.text import diff_lines, history_lines

    folder, refs = _split_words(args.words)
    try:
        history = read_history(_run_dir(args, folder))
    except RunFolderNotFoundError as error:
        raise RunsUsageError(str(error)) from None
    if refs is None:
        print("\n".join(history_lines(history)))
        return 0
    from tpu_pipeline.pipeline.runs.compare import diff_runs

    if len(history.runs) < 2:
        raise RunsUsageError(
            f"runs diff: {history.run_dir} holds {len(history.runs)} run(s); it takes two"
        )
    try:
        older, newer = (history.find(ref) for ref in refs) if refs else history.runs[1::-1]
    except LookupError as error:
        raise RunsUsageError(f"runs diff: {error.args[0]}") from None
    print("\n".join(diff_lines(diff_runs(older, newer))))
    return 0
