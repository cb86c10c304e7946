"""The configuration flags every `tpu-pipeline` command shares: `--config` and `--set`.

One definition, so every command reads a configuration the same way: the YAML
file first, then the command's own flags, then `--set FIELD=VALUE` pairs.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

import yaml

from tpu_pipeline.common.config import (
    BUILTIN_DATASETS,
    DEFAULT_DATASET,
    PipelineConfig,
    explicit_fields,
    load_config,
    user_dataset,
)

if TYPE_CHECKING:
    from tpu_pipeline.components.example_gen.recognize import RecognizedData


def parse_assignment(text: str) -> tuple[str, Any]:
    """Turns `FIELD=VALUE` into `(field, value)`, the value read as YAML (numbers, lists...).

    A value YAML cannot read stays the string it is: `*/*.tfrecord` is a file
    pattern, not a broken YAML alias.
    """
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected FIELD=VALUE, got {text!r}")
    key, value = text.split("=", 1)
    try:
        return key.strip(), yaml.safe_load(value)
    except yaml.YAMLError:
        return key.strip(), value


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def add_config_flags(
    parser: argparse.ArgumentParser,
    config_help: str = "YAML configuration file (fields: README, Configuration)",
) -> None:
    """Adds `--config FILE` and the repeatable `--set FIELD=VALUE` to `parser`."""
    parser.add_argument("--config", metavar="FILE", help=config_help)
    parser.add_argument(
        "--set",
        dest="assignments",
        action="append",
        type=parse_assignment,
        default=[],
        metavar="FIELD=VALUE",
        help="set any configuration field, e.g. --set trainer.epochs=3 (repeatable)",
    )


def config_from_args(
    args: argparse.Namespace,
    flags: dict[str, Any] | None = None,
    recognized: RecognizedData | None = None,
) -> PipelineConfig:
    """Loads the configuration: what was `recognized` in the data folder, then the file,
    then the command's own `flags` (dotted keys), then `--set`.

    A dataset recognised without a schema file of the user's bootstraps its schema in
    the run folder (`<run>/schema/schema.pbtxt`), never over a built-in dataset's.
    """
    overrides = {**(flags or {}), **dict(args.assignments)}
    if recognized is None:
        return load_config(args.config, overrides)
    base = {"dataset": recognized.dataset}
    config = load_config(args.config, overrides, base)
    if config.dataset.schema_file is None:
        schema_file = str(config.run_dir / "schema" / "schema.pbtxt")
        config = load_config(
            args.config, overrides, {"dataset": {**recognized.dataset, "schema_file": schema_file}}
        )
    return config


# What makes a folder of TFRecords the default dataset's, read as it always was.
_DEFAULT_LAYOUT = ("format", "pixel_feature", "label_feature", "image_shape")


def recognized_from_args(
    args: argparse.Namespace, flags: dict[str, Any] | None = None, unlabelled: bool = False
) -> RecognizedData | None:
    """What the data folder the user named holds, when they named no dataset: the one
    recognition `run`, `predict` and `data import` share.

    `unlabelled` (predict) takes photos without class folders too. None when no data
    folder is named, a dataset is (`--dataset`, `dataset: NAME`, `dataset.name`), the
    folder's files say nothing recognisable, or the user chose another `dataset.format`
    than the folder's: then the configuration alone decides.

    Raises:
      DataFormatError: the folder could be read two ways or holds too little (exit 3).
    """
    overrides = {**(flags or {}), **dict(args.assignments)}
    given = user_dataset(args.config, overrides)
    if not isinstance(given, dict) or "name" in given or not given.get("data_dir"):
        return None
    if "://" in str(given["data_dir"]):  # a bucket: the configuration says what it holds
        return None
    from tpu_pipeline.components.example_gen.recognize import recognize_folder

    found = recognize_folder(given["data_dir"], frozenset(BUILTIN_DATASETS), unlabelled)
    if found is None or given.get("format", found.dataset["format"]) != found.dataset["format"]:
        return None
    default = BUILTIN_DATASETS[DEFAULT_DATASET]
    if all(found.dataset.get(key) == default.get(key, "tfrecord") for key in _DEFAULT_LAYOUT):
        return None  # the default dataset's own records: its name and run folder stay
    return found


def explicit_from_args(
    args: argparse.Namespace, flags: dict[str, Any] | None = None
) -> frozenset[str]:
    """The dotted fields the user set: in the file, by the command's `flags` or by `--set`."""
    return explicit_fields(args.config, {**(flags or {}), **dict(args.assignments)})
