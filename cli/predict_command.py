"""`tpu-pipeline predict`: a pushed model over a folder of raw files, into a readable file.

Registered by cli/main.py. The work is a Beam job (`pipeline/batch_predict/`);
this module reads the flags: the model, the data and how to read it (recognised
from `--data-dir` alone, as `run` recognises it, in the model's classes and image
shape, `pipeline/batch_predict/folder_dataset.py`; or the dataset fields as flags or
from `--config`, as `run` and `data import` take them), the output file, and Beam's
own arguments (`--beam-arg ARG` or anything after `--`), so
`--runner=DataflowRunner ...` runs the same job on Dataflow. Library logs go to a
file in the temp folder; progress to stderr; the result line to stdout. Every job
also compares its images with the model's reference (`drift:`, docs/drift.md): one
`data shift:` line on stderr says what moved and by how much, or that nothing did;
`--fail-on-drift` makes a shift exit 3 for scripts. `--explain N` draws what drove
the N answers the model was least sure of.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from tpu_pipeline.cli.config_flags import (
    add_config_flags,
    config_from_args,
    positive_int,
    recognized_from_args,
)
from tpu_pipeline.cli.saved_config import recognized_line
from tpu_pipeline.common.owned_paths import check_replaceable

if TYPE_CHECKING:  # the job's module loads TensorFlow and Beam: only when predicting
    from tpu_pipeline.common.config import NotifyConfig, PipelineConfig
    from tpu_pipeline.components.example_gen.recognize import RecognizedData
    from tpu_pipeline.pipeline.batch_predict import BatchResult

PREDICT_COMMAND = "predict"
# cli/main.py's EXIT_DATA_REJECTED: data that drifts, whichever command finds it.
EXIT_DRIFTED = 3


def add_predict_command(commands: argparse._SubParsersAction) -> None:
    """Adds `predict` to the `tpu-pipeline` parser."""
    predict = commands.add_parser(
        PREDICT_COMMAND,
        help="batch predictions of a pushed model over a folder of files (Beam)",
        description="Predicts every record under --data-dir with a pushed model and writes one "
        "row per record (source, class, class_name, probability, the top k, label if any). "
        "Beam arguments go after `--`, e.g. -- --runner=DataflowRunner --project=P "
        "--region=R --temp_location=gs://B/tmp",
    )
    predict.add_argument(
        "--model",
        required=True,
        metavar="PATH",
        help="a pushed version folder, or a run or serving_model folder (its newest version)",
    )
    predict.add_argument(
        "--data-dir",
        required=True,
        metavar="DIR",
        help="folder or bucket of files in any format ExampleGen reads; a folder of photos "
        "(with class folders: also scored; without: predicted) or of files that say what "
        "they are is recognised as `run` recognises it, in the model's classes and shape",
    )
    predict.add_argument("--dataset", help="the dataset the model was trained on (default digits)")
    predict.add_argument("--format", help="dataset.format: how to read the files")
    predict.add_argument(
        "--pattern",
        metavar="GLOB",
        help="files under --data-dir to read (default: dataset.file_pattern, its "
        "split_patterns, or the format's)",
    )
    predict.add_argument(
        "--output",
        required=True,
        metavar="FILE",
        help="the file to write, by extension: .csv, .jsonl, or .tfrecord (PredictionLog); "
        "an existing file is replaced only if tpu-pipeline wrote it, and only once the new one is "
        "whole",
    )
    predict.add_argument(
        "--top-k", type=positive_int, default=3, help="classes listed per record (default: 3)"
    )
    predict.add_argument(
        "--batch-size", type=positive_int, default=256, help="records per model call (256)"
    )
    predict.add_argument(
        "--fail-on-drift",
        action="store_true",
        help="exit 3 when the images moved away from the model's reference (the "
        "predictions are written all the same)",
    )
    predict.add_argument(
        "--explain",
        type=positive_int,
        metavar="N",
        help="also draw attribution maps of the N answers the model was least sure of "
        "(method and steps: the explain section of --config; docs/explain.md)",
    )
    predict.add_argument(
        "--explain-dir",
        metavar="DIR",
        help="folder where --explain writes attributions.png, .json and maps.npz: new, empty "
        "or one it wrote before (default: a folder beside --output, named after it with "
        "-explained)",
    )
    predict.add_argument(
        "--summary-json",
        metavar="FILE",
        help="also write the job's result, its drift check with every signal, to this JSON file",
    )
    predict.add_argument(
        "--beam-arg",
        dest="beam_flags",
        action="append",
        default=[],
        metavar="ARG",
        help="a Beam pipeline option, e.g. --beam-arg=--runner=DataflowRunner (repeatable)",
    )
    predict.add_argument("beam_args", nargs="*", help=argparse.SUPPRESS)
    add_config_flags(predict, "YAML configuration file naming the dataset")


def beam_args(args: argparse.Namespace) -> list[str]:
    """Beam's pipeline options: every `--beam-arg`, then everything after `--`."""
    return [*args.beam_flags, *args.beam_args]


def run_predict(args: argparse.Namespace) -> int:
    """Runs `predict`; prints where the predictions went and how many there are."""
    flags = {"dataset": args.dataset, "dataset.format": args.format}
    recognized = recognized_from_args(
        args, {**flags, "dataset.data_dir": args.data_dir}, unlabelled=True
    )
    if recognized is not None:
        print(recognized_line(recognized, args.data_dir), file=sys.stderr, flush=True)
    config = config_from_args(args, flags)
    if args.summary_json:  # a file of the user's there: refused before the job
        check_replaceable(args.summary_json, "--summary-json")
    from tpu_pipeline.cli.console import output_to_log_file, quiet_library_warnings, temp_log_file
    from tpu_pipeline.pipeline.local.progress import LiveStatus

    quiet_library_warnings()
    with output_to_log_file(temp_log_file("predict")) as terminal:
        from tpu_pipeline.pipeline.batch_predict import run_batch_predictions

        dataset, read_as, data_dir = config.dataset, None, args.data_dir.rstrip("/")
        if recognized is not None:
            plan = _plan_for_model(recognized, args.model, config, terminal)
            dataset, read_as, data_dir = plan.dataset, plan.read_as, plan.files.data_dir
        status = LiveStatus(terminal)
        status.start(f"predicting {args.data_dir} with {args.model}")
        try:
            result = run_batch_predictions(
                args.model,
                dataset,
                data_dir,
                args.output,
                pattern=args.pattern,
                top_k=args.top_k,
                batch_size=args.batch_size,
                beam_args=beam_args(args),
                status=status,
                drift=config.drift,
                explain=args.explain or 0,
                explain_dir=args.explain_dir,
                explain_settings=config.explain,
                read_as=read_as,
            )
        finally:
            status.stop()
    accuracy = ""
    if result.labelled:
        accuracy = (
            f"; {result.labelled:,} labelled, accuracy {result.correct / result.labelled:.4f}"
        )
    print(f"model: {result.model_dir} ({status.elapsed():.1f} s)", file=sys.stderr)
    print(result.drift.headline(), file=sys.stderr)
    if result.drift.shifts and config.notify is not None:
        _notify_shift(config.notify, result)
    if result.explained is not None:
        print(_explained_line(result), file=sys.stderr)
    if args.summary_json:
        _write_summary(args.summary_json, result)
    print(f"wrote {result.predictions:,} predictions to {result.output}{accuracy}", flush=True)
    return EXIT_DRIFTED if args.fail_on_drift and result.drift.shifts else 0


def _plan_for_model(recognized: RecognizedData, model: str, config: PipelineConfig, terminal):
    """The recognised folder in the model's classes and shape; one line when they differ."""
    from tpu_pipeline.pipeline.batch_predict.folder_dataset import plan_for_model
    from tpu_pipeline.pipeline.batch_predict.model_path import (
        resolve_model_version,
        served_dataset,
    )

    served = served_dataset(resolve_model_version(model), config.dataset)
    plan = plan_for_model(recognized.dataset, served)
    if plan.note:
        print(plan.note, file=terminal, flush=True)
    return plan


def _explained_line(result: BatchResult) -> str:
    from tpu_pipeline.pipeline.batch_predict.explain import PICTURE_FILE

    explained = result.explained
    if not explained.chosen:
        return f"explained: nothing (no record was predicted); {result.explain_dir}"
    return (
        f"explained: the {len(explained.chosen)} least confident answers "
        f"({explained.method_name}, {explained.settings['seconds']:.1f} s): "
        f"{result.explain_dir.rstrip('/')}/{PICTURE_FILE}"
    )


def _notify_shift(notify: NotifyConfig, result: BatchResult) -> None:
    """Posts the shift to the `notify:` webhook; a webhook that fails is one warning line."""
    from tpu_pipeline.common.webhook import post_notification, slack_message

    text = f"tpu-pipeline predict: the data moved ({result.output})"
    details = [result.drift.headline(), f"model: {result.model_dir}"]
    warning = post_notification(notify, slack_message(text, details))
    if warning:
        print(f"tpu-pipeline: warning: {warning}", file=sys.stderr)


def _write_summary(path: str, result: BatchResult) -> None:
    """`--summary-json`: the counts and the drift check, replaced whole or not at all."""
    from tpu_pipeline.common.owned_paths import write_owned

    summary = {
        "model": result.model_dir,
        "output": result.output,
        "predictions": result.predictions,
        "labelled": result.labelled,
        "correct": result.correct,
        "drift": result.drift.to_json(),
        "explained": None
        if result.explained is None
        else {
            "folder": result.explain_dir,
            "method": result.explained.method,
            "answers": [c.as_json() for c in result.explained.chosen],
        },
    }
    write_owned(path, json.dumps(summary, indent=2) + "\n", "--summary-json")
