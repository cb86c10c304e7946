"""`tpu-pipeline`: run, check, report on and deploy the image-classification TFX pipeline.

Heavy libraries (TensorFlow, TFX, Beam) are imported inside the commands, after
the environment and the log redirection are set up, so their start-up noise
lands in the log file and `--help` answers at once.

Exit codes: see EXIT_CODES_HELP (also in `--help`). Progress and diagnostics
(component lines, FAILED, DATA REJECTED) go to stderr; results a script reads
(the summary lines, `--summary-json`) to stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.metadata
import os
import pathlib
import sys

from tpu_pipeline.cli.config_flags import (
    add_config_flags,
    config_from_args,
    explicit_from_args,
    positive_int,
    recognized_from_args,
)
from tpu_pipeline.cli.data_commands import add_data_commands, run_data_command
from tpu_pipeline.cli.predict_command import PREDICT_COMMAND, add_predict_command, run_predict
from tpu_pipeline.cli.process_exit import exit_after_cleanup
from tpu_pipeline.cli.report_commands import (
    REPORT_COMMANDS,
    add_report_commands,
    run_report_command,
    write_run_report,
)
from tpu_pipeline.cli.run_folder import RunFolderError
from tpu_pipeline.cli.runs_commands import RUNS_COMMAND, add_runs_command, run_runs_command
from tpu_pipeline.cli.saved_config import recognized_lines, save_config
from tpu_pipeline.cli.serving_commands import (
    SERVING_COMMAND,
    add_serving_commands,
    run_serving_command,
)
from tpu_pipeline.cli.stop_summary import write_stop_summary, write_summary_json
from tpu_pipeline.cli.vertex_commands import (
    VERTEX_COMMANDS,
    add_vertex_commands,
    run_vertex_command,
)
from tpu_pipeline.common.config import BUILTIN_DATASETS, ConfigError
from tpu_pipeline.common.interrupts import (
    RunInterrupted,
    exit_code,
    received_signal,
    stop_on_signals,
)
from tpu_pipeline.common.metadata_check import (
    DamagedMetadataError,
    LockedMetadataError,
    check_metadata_store,
)
from tpu_pipeline.common.owned_paths import check_replaceable
from tpu_pipeline.common.run_lock import RunInProgressError, claim_run_folder, exclusive_run
from tpu_pipeline.components.example_gen.errors import DataFormatError
from tpu_pipeline.pipeline.wiring.input_fingerprint import new_inputs, record_success

EXIT_OK, EXIT_FAILED, EXIT_BAD_CONFIG, EXIT_DATA_REJECTED = 0, 1, 2, 3
EXIT_CODES_HELP = """exit codes:
  0    success (a run that was not blessed too: read `blessed` in the summary)
  1    the run or command failed
  2    bad configuration or arguments, or a path named that holds files
       tpu-pipeline did not write (nothing is written there)
  3    data rejected: bad input files, a data folder without matching files, or
       data that breaks the schema or drifts, whichever command finds it; a `run`
       that exits 3 published no model
  130  stopped by SIGINT (Ctrl-C); 143 by SIGTERM"""


# Commands that run TFX or Beam and send the libraries' output to a log file; every other
# command prints only its answer (`tpu_pipeline.cli.console.quiet_command`).
LOGGED_COMMANDS = ("run", "schema", PREDICT_COMMAND)

# Listed by hand: importing the model registry would load TensorFlow for `--help`.
MODEL_HELP = (
    "a built-in (cnn_bn, mnist_cnn, cifar10_cnn, resnet20, fast_cnn, efficientnet_b0, "
    "resnet50, mobilenet_v2) or package.module:function"
)


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tpu-pipeline",
        description=__doc__.split("\n")[0],
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"%(prog)s {importlib.metadata.version('tpu-pipeline')}",
        help="print the installed version and exit",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run the whole pipeline locally (LocalDagRunner)")
    add_config_flags(run)
    run.add_argument("--dataset", help=f"built-in dataset: {', '.join(BUILTIN_DATASETS)}")
    run.add_argument(
        "--data-dir",
        metavar="DIR",
        help="folder of the dataset's files (dataset.data_dir), instead of the built-in data",
    )
    run.add_argument(
        "--output-dir",
        metavar="DIR",
        help="folder for every run's outputs; this run's go to DIR/<pipeline>-<dataset> "
        "(default: output)",
    )
    run.add_argument("--train-steps", type=int, help="training steps")
    run.add_argument("--model", help=MODEL_HELP)
    run.add_argument(
        "--verbose", action="store_true", help="show the full logs instead of progress lines"
    )
    run.add_argument(
        "--if-new-data",
        action="store_true",
        help="exit 0 at once, saying so, unless a new span, a new or changed input file or "
        "another configuration arrived since this run folder's last successful run",
    )
    run.add_argument(
        "--summary-json",
        type=pathlib.Path,
        metavar="FILE",
        help="also write the run summary as JSON to this file",
    )
    run.add_argument(
        "--save-config",
        type=pathlib.Path,
        metavar="FILE",
        help="also write the dataset recognised in --data-dir, and the defaults chosen from "
        "it, to this YAML file: `run --config FILE` runs the same again",
    )
    run.add_argument(
        "--fail-on-drift",
        action="store_true",
        help="with spans: when the new span's images moved from the served model's, push "
        "nothing and exit 3 (sets drift.block_push: the check runs before the Pusher)",
    )

    schema = commands.add_parser("schema", help="schema tools")
    schema_commands = schema.add_subparsers(dest="schema_command", required=True)
    infer = schema_commands.add_parser(
        "infer",
        help="bootstrap a schema again from examples with TFDV (a run bootstraps a new "
        "dataset's by itself)",
    )
    infer.add_argument(
        "--data",
        required=True,
        metavar="PATH",
        help="examples in the pipeline layout: a TFRecord file, a glob, or a folder of them, "
        "e.g. RUN/pipeline_root/ExampleGen/examples/<id>/Split-train",
    )
    infer.add_argument(
        "--name", help="dataset name: writes schemas/<name>/schema.pbtxt (or give --config)"
    )
    add_config_flags(
        infer, "YAML configuration file naming the dataset: writes its dataset.schema_file"
    )
    infer.add_argument(
        "--output",
        type=pathlib.Path,
        metavar="FILE",
        help="the schema file to write (a .pbtxt file, not a folder); default: the dataset's "
        "schema_file, else schemas/<name>/schema.pbtxt",
    )
    infer.add_argument(
        "--force",
        action="store_true",
        help="replace an existing schema file (kept beside it as <name>.replaced-<time>)",
    )

    preflight = commands.add_parser(
        "preflight", help="check on this CPU that the model and input will run on a TPU"
    )
    add_config_flags(preflight)
    preflight.add_argument("--dataset", help=f"built-in dataset: {', '.join(BUILTIN_DATASETS)}")
    preflight.add_argument("--model", help=MODEL_HELP)
    preflight.add_argument(
        "--replicas", type=positive_int, default=8, help="TPU cores (default: 8)"
    )
    add_vertex_commands(commands)
    add_data_commands(commands)
    add_report_commands(commands)
    add_runs_command(commands)
    add_serving_commands(commands)
    add_predict_command(commands)
    return parser


def _run(args: argparse.Namespace) -> int:
    """`run`: every way it ends writes `--summary-json` (a stop before any component too)."""
    flags = {
        "dataset": args.dataset,
        "dataset.data_dir": args.data_dir,
        "output_dir": args.output_dir,
        "trainer.train_steps": args.train_steps,
        "trainer.model": args.model,
        "drift.block_push": True if args.fail_on_drift else None,
    }
    pipeline_name, chosen = "tpu-pipeline", None
    for path, flag in ((args.summary_json, "--summary-json"), (args.save_config, "--save-config")):
        if path:  # a file of the user's there: refused before anything runs
            check_replaceable(path, flag)
    try:
        recognized = recognized_from_args(args, flags)
        config = config_from_args(args, flags, recognized)
        pipeline_name = config.full_pipeline_name
        recipe = _recipe_for(config, explicit_from_args(args, flags), args.verbose)
        chosen = recipe.to_json()
        for line in recognized_lines(recognized, config, args.save_config):
            print(line, file=sys.stderr, flush=True)
        if args.save_config:
            save_config(args.save_config, recipe.config, recipe)
        for line in recipe.lines():
            print(line, file=sys.stderr, flush=True)
        _require_reachable_weights(recipe.config)
        return _run_configured(args, recipe.config, chosen)
    except (Exception, RunInterrupted) as error:
        if args.summary_json:
            write_stop_summary(args.summary_json, pipeline_name, error, chosen)
        raise


def _recipe_for(config, explicit: frozenset[str], verbose: bool = False):
    """The defaults the data decides (`pipeline/wiring/recipe.py`): a few seconds, and for
    thousands of photos trained from scratch a few more to time the model's training here."""
    from tpu_pipeline.components import imagenet_files
    from tpu_pipeline.pipeline.data_tools.data_survey import survey_image_folder
    from tpu_pipeline.pipeline.wiring.recipe import choose_recipe

    def imagenet_available(model: str, image_shape: tuple[int, int, int]) -> bool:
        return imagenet_files.is_available(imagenet_files.IMAGENET_FILES[model](image_shape))

    def measure_rate(model: str, image_shape, num_classes: int, batch: int):
        from tpu_pipeline.cli.console import output_to_log_file, quiet_library_warnings

        quiet = contextlib.nullcontext()
        if not verbose:
            quiet_library_warnings()  # before TensorFlow loads, as the run does
            # TensorFlow's C++ start-up lines go nowhere, as the run sends them to its log.
            quiet = output_to_log_file(pathlib.Path(os.devnull))
        with quiet:
            from tpu_pipeline.components.training.probe import probe_training_rate

            return probe_training_rate(config.trainer, model, image_shape, num_classes, batch)

    survey = survey_image_folder(config.dataset)
    return choose_recipe(config, explicit, survey, imagenet_available, measure_rate)


def _require_reachable_weights(config) -> None:
    """`imagenet` that is neither cached nor downloadable stops here, before TensorFlow loads."""
    from tpu_pipeline.components import imagenet_files

    files = imagenet_files.IMAGENET_FILES.get(config.trainer.model)
    if config.trainer.pretrained_weights == "imagenet" and files is not None:
        imagenet_files.require_available(files(config.dataset.image_shape))


def _run_configured(args: argparse.Namespace, config, chosen) -> int:
    from tpu_pipeline.cli.console import output_to_log_file, quiet_library_warnings

    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    log_file = config.run_dir / "logs" / f"run-{stamp}.log"
    run_log = None if args.verbose else str(log_file)
    if not args.verbose:
        quiet_library_warnings()
    claim_run_folder(config)
    with exclusive_run(config.run_dir):
        check_metadata_store(config.metadata_path)
        if args.if_new_data and not _has_new_inputs(config):
            return EXIT_OK
        try:
            if args.verbose:
                summary, report, inputs = _run_pipeline(config, sys.stderr, None, chosen)
            else:
                with output_to_log_file(log_file) as terminal:
                    summary, report, inputs = _run_pipeline(config, terminal, run_log, chosen)
        except (ConfigError, DataFormatError, RunInterrupted) as error:  # before any component
            if config.notify:
                from tpu_pipeline.pipeline.results.run_summary import RunSummary

                name = config.full_pipeline_name
                _notify(config, RunSummary.without_results(name, [], error, run_log), None)
            raise
        summary.chosen_defaults = chosen
        if summary.succeeded:
            record_success(config.run_dir, inputs)
        # Under the run lock: the next run must not replace this one's report, or become the
        # newest run in ML Metadata, while they are read and sent. A stopped run ends now.
        tracked = None if summary.interrupted else _track(config, summary)
    if summary.problems():
        print(summary.problems(), file=sys.stderr, flush=True)
    if summary.span_shifted:
        print(summary.span_shift["headline"], file=sys.stderr, flush=True)
    if report:
        print(report, flush=True)
    print(summary.to_text(), flush=True)
    if args.summary_json:
        write_summary_json(args.summary_json, summary.to_json())
    _notify(config, summary, report)
    if tracked is not None:
        for line in tracked.lines:
            print(line, flush=True)
        if tracked.warning:
            print(
                f"tpu-pipeline: warning: {tracked.warning}; the run's result stands",
                file=sys.stderr,
            )
    if summary.interrupted:
        return exit_code(received_signal())
    if summary.data_rejected:
        return EXIT_DATA_REJECTED
    if not summary.succeeded:
        return EXIT_FAILED
    # The SpanShiftGate held the push back (components/span_shift_gate.py): nothing published.
    return EXIT_DATA_REJECTED if config.drift.block_push and summary.span_shifted else EXIT_OK


def _has_new_inputs(config) -> bool:
    """`--if-new-data`: whether anything arrived since the last successful run, saying so."""
    news = new_inputs(config)
    if news is None:
        print(
            f"tpu-pipeline: nothing to do: no new data since the last successful run "
            f"in {config.run_dir}",
            flush=True,
        )
        return False
    print(f"tpu-pipeline: {news}", file=sys.stderr, flush=True)
    return True


def _notify(config, summary, report: str | None) -> None:
    """Tells `notify.webhook` (if set) how the run ended; if it cannot, one warning line."""
    from tpu_pipeline.pipeline.results.run_message import notify_run

    warning = notify_run(config, summary, report)
    if warning:
        print(f"tpu-pipeline: warning: {warning}; the run's result stands", file=sys.stderr)


def _track(config, summary):
    """Logs the run to MLflow, if a tracking URI is set; returns what to say (`Tracked`)."""
    from tpu_pipeline.pipeline.tracking import track_run

    return track_run(config, summary)


def _run_pipeline(config, progress, log_file, chosen=None):
    """Runs the pipeline with progress on `progress`; `chosen` are the defaults chosen from the
    data (pipeline/wiring/recipe.py), kept in the summary.

    Returns:
      The summary, the report line, and the fingerprint of the inputs as the run
      started (recorded if it succeeds, for `--if-new-data`).

    Raises:
      DataFormatError: the data folder is missing or has no file to read; nothing ran.
    """
    from tpu_pipeline.pipeline.wiring.data_sources import prepare_data_root
    from tpu_pipeline.pipeline.wiring.input_fingerprint import fingerprint_inputs, input_patterns

    data_root = prepare_data_root(config)  # a wrong data folder stops here in one line
    # Taken before ExampleGen reads: a file landing during the run counts as new next time.
    inputs = fingerprint_inputs(config, data_root, input_patterns(config.dataset))
    from tpu_pipeline.pipeline.local.runner import run_local

    print(f"tpu-pipeline: running {config.full_pipeline_name} in {config.run_dir}", file=progress)

    summary = run_local(config, progress, log_file, inputs=inputs, chosen_defaults=chosen)
    if summary.interrupted:  # stop within seconds; `tpu-pipeline report` can write it later
        return summary, None, inputs
    return summary, write_run_report(config, summary), inputs


def _schema_output(args: argparse.Namespace) -> pathlib.Path:
    """The schema file `schema infer` writes, checked before TFDV spends any time.

    Raises:
      ConfigError: no dataset named, both --name and a configuration, or --output is a folder.
      FileExistsError: the file exists and --force is off.
    """
    from tpu_pipeline.schemas import schema_path

    configured = bool(args.config or args.assignments)
    if args.name and configured:
        raise ConfigError("schema infer: give --name or --config/--set, not both")
    if args.output:
        output = args.output
    elif configured:
        output = config_from_args(args).dataset.resolved_schema_file
    elif args.name:
        output = schema_path(args.name)
    else:
        raise ConfigError(
            "schema infer: say which dataset the schema is for: --name NAME, --config FILE "
            "(writes its dataset.schema_file) or --output FILE"
        )
    if output.is_dir():
        raise ConfigError(
            f"schema infer: {output} is a folder; the schema is a file, "
            f"e.g. {output / 'schema.pbtxt'}"
        )
    if output.exists() and not args.force:
        raise FileExistsError(f"{output} exists; pass --force to replace the curated schema")
    return output


def _schema_infer(args: argparse.Namespace) -> int:
    from tpu_pipeline.cli.console import output_to_log_file, quiet_library_warnings, temp_log_file
    from tpu_pipeline.pipeline.local.progress import LiveStatus

    data = pathlib.Path(args.data)
    pattern = str(data / "*") if data.is_dir() else args.data
    output = _schema_output(args)
    quiet_library_warnings()
    # TensorFlow's, Beam's and TFDV's start-up lines and deprecation warnings go to the log.
    with output_to_log_file(temp_log_file("schema-infer")) as terminal:
        from tpu_pipeline.pipeline.data_tools.schema_tools import infer_schema, write_schema

        kept = write_schema(
            infer_schema(pattern, LiveStatus(terminal)), output, overwrite=args.force
        )
    if kept is not None:
        print(f"kept the schema it replaced as {kept}")
    print(f"wrote {output}: review value ranges, shapes and the label domain before relying on it")
    return EXIT_OK


def _preflight(args: argparse.Namespace) -> int:
    config = config_from_args(args, {"dataset": args.dataset, "trainer.model": args.model})
    from tpu_pipeline.components.preflight import run_preflight

    report = run_preflight(config.dataset, config.trainer, replicas=args.replicas)
    print(report.to_text(), flush=True)
    return EXIT_OK if report.passed else EXIT_FAILED


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `tpu-pipeline` console command."""
    args = _build_parser().parse_args(argv)
    with stop_on_signals():
        code = _run_command(args)
        signum = received_signal()
    if signum is None:
        return code
    # TensorFlow's and Beam's threads take ~10 s to wind down at exit: stop now instead.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code(signum))


def _run_command(args: argparse.Namespace) -> int:
    if args.command not in LOGGED_COMMANDS:
        from tpu_pipeline.cli.console import quiet_command

        quiet_command()
    try:
        if args.command == "run":
            return _run(args)
        if args.command in VERTEX_COMMANDS:
            return run_vertex_command(args)
        if args.command == "preflight":
            return _preflight(args)
        if args.command in REPORT_COMMANDS:
            return run_report_command(args)
        if args.command == RUNS_COMMAND:
            return run_runs_command(args)
        if args.command == SERVING_COMMAND:
            return run_serving_command(args)
        if args.command == PREDICT_COMMAND:
            return run_predict(args)
        if args.command == "data":
            run_data_command(args)
            return EXIT_OK
        return _schema_infer(args)
    # A path of the user's that is refused, and a run folder that is not there, too.
    except (ConfigError, FileExistsError, RunFolderError) as error:
        print(f"tpu-pipeline: {error}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    except FileNotFoundError as error:
        print(f"tpu-pipeline: {error}", file=sys.stderr)
        return EXIT_FAILED
    except DataFormatError as error:
        print(f"tpu-pipeline: {error}", file=sys.stderr)
        return EXIT_DATA_REJECTED
    except (RunInProgressError, DamagedMetadataError, LockedMetadataError) as error:
        print(f"tpu-pipeline: {error}", file=sys.stderr)
        return EXIT_FAILED
    except RunInterrupted:
        print(f"tpu-pipeline: interrupted by {received_signal().name}", file=sys.stderr)
        return exit_code(received_signal())


if __name__ == "__main__":
    exit_after_cleanup(main())
