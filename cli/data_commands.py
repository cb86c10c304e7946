"""`tpu-pipeline data generate|import`: synthetic data, and raw files checked into a new span.

Registered by cli/main.py; heavy imports (TensorFlow, PIL) wait until a
command runs, so `--help` answers at once.
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import sys
from typing import TYPE_CHECKING

from tpu_pipeline.cli.config_flags import (
    add_config_flags,
    config_from_args,
    recognized_from_args,
)
from tpu_pipeline.cli.saved_config import recognized_line

if TYPE_CHECKING:
    from tpu_pipeline.components.example_gen.recognize import RecognizedData


def add_data_commands(commands: argparse._SubParsersAction) -> None:
    """Adds `data generate` and `data import` to the `tpu-pipeline` parser."""
    from tpu_pipeline.cli.synthetic_data import FORMATS, SHAPES

    data = commands.add_parser("data", help="generate synthetic data; import data as a new span")
    data_commands = data.add_subparsers(dest="data_command", required=True)

    generate = data_commands.add_parser("generate", help="write synthetic images in any format")
    generate.add_argument("--format", required=True, choices=FORMATS, help="file format to write")
    generate.add_argument(
        "--shape", choices=sorted(SHAPES), default="mnist", help="image shape (default: mnist)"
    )
    generate.add_argument("--count", type=int, default=1000, help="images in all")
    generate.add_argument("--eval-count", type=int, default=0, help="of them, the test split")
    generate.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    generate.add_argument(
        "--output",
        type=pathlib.Path,
        required=True,
        metavar="DIR",
        help="new folder to write the files into (an existing one is never overwritten)",
    )

    imported = data_commands.add_parser(
        "import", help="check raw files and copy them into data_dir as a new span-N folder"
    )
    imported.add_argument(
        "--source",
        type=pathlib.Path,
        required=True,
        metavar="PATH",
        help="the raw data to import: one file, or a folder of files in the dataset's format; "
        "with no dataset named, a folder is recognised as `run --data-dir` recognises one "
        "(class folders of photos, IDX, CIFAR-10 binary, npz, TFRecords) and decides the format",
    )
    imported.add_argument(
        "--data-dir",
        metavar="DIR",
        help="the dataset's folder the span-N folder goes into (dataset.data_dir)",
    )
    imported.add_argument("--span", type=int, help="span number (default: the next one)")
    add_config_flags(imported, "YAML configuration file naming the dataset")


def run_data_command(args: argparse.Namespace) -> None:
    """Runs `data generate` or `data import`, printing one line of result."""
    if args.data_command == "generate":
        from tpu_pipeline.cli.synthetic_data import write_synthetic
        from tpu_pipeline.common.config import ConfigError

        try:
            folder = write_synthetic(
                args.output, args.format, args.count, args.shape, args.eval_count, args.seed
            )
        except ValueError as error:  # counts that cannot be split
            raise ConfigError(str(error)) from None
        print(f"wrote {args.count} synthetic {args.shape} images as {args.format} to {folder}")
        return
    from tpu_pipeline.cli.span_import import import_span

    flags = {"dataset.data_dir": args.data_dir}
    source, recognized = args.source, None
    if source.is_dir():
        recognized = recognized_from_args(args, {"dataset.data_dir": str(source)})
    if recognized is not None:
        print(recognized_line(recognized, str(source)), file=sys.stderr, flush=True)
        source = pathlib.Path(recognized.dataset["data_dir"])  # inside a wrapping folder
        recognized = _as_spans(recognized)
    config = config_from_args(args, flags, recognized)
    folder, count = import_span(config.dataset, source, args.span, progress=sys.stderr)
    print(f"imported {count} examples into {folder}")
    if recognized is not None:
        pattern = config.dataset.file_pattern
        print(
            f"tpu-pipeline: its spans are read with --set dataset.file_pattern='{pattern}' "
            f"(format {config.dataset.format})",
            file=sys.stderr,
        )


def _as_spans(recognized: RecognizedData) -> RecognizedData:
    """The recognised dataset with its files inside span folders (`span-{SPAN}/...`), its
    `data_dir` left to `--data-dir` (the source folder is never written into)."""
    from tpu_pipeline.cli.span_import import span_file_pattern

    left = ("split_patterns", "data_dir")
    dataset = {k: v for k, v in recognized.dataset.items() if k not in left}
    dataset["file_pattern"] = span_file_pattern(recognized.dataset)
    return dataclasses.replace(recognized, dataset=dataset)
