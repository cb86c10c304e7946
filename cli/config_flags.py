"""The configuration flags every `tpu-pipeline` command shares: `--config` and `--set`.

One definition, so every command reads a configuration the same way: the YAML
file first, then the command's own flags, then `--set FIELD=VALUE` pairs.
"""

from __future__ import annotations

import argparse
from typing import Any

import yaml

from common.config import PipelineConfig, explicit_fields, load_config


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
    args: argparse.Namespace, flags: dict[str, Any] | None = None
) -> PipelineConfig:
    """Loads the configuration: file, then the command's own `flags` (dotted keys), then `--set`."""
    return load_config(args.config, {**(flags or {}), **dict(args.assignments)})


def explicit_from_args(
    args: argparse.Namespace, flags: dict[str, Any] | None = None
) -> frozenset[str]:
    """The dotted fields the user set: in the file, by the command's `flags` or by `--set`."""
    return explicit_fields(args.config, {**(flags or {}), **dict(args.assignments)})
