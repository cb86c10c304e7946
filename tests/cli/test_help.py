"""What `tpu-pipeline` says about itself: version, exit codes, a help text for every option."""

from __future__ import annotations

import argparse
import importlib.metadata
import pathlib
import re
import subprocess
import sys

from tpu_pipeline.cli.main import MODEL_HELP, _build_parser
from tpu_pipeline.components.models import MODEL_BUILDERS


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tpu_pipeline.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _parsers(parser: argparse.ArgumentParser):
    """`parser` and every subcommand's parser below it."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from _parsers(child)


def test_version_prints_the_installed_version():
    result = _cli("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"tpu-pipeline {importlib.metadata.version('tpu-pipeline')}"


def test_help_lists_every_exit_code():
    result = _cli("--help")
    assert result.returncode == 0
    codes = result.stdout.split("exit codes:")[1]
    for code, meaning in [
        ("0", "success"),
        ("1", "the run or command failed"),
        ("2", "bad configuration"),
        ("3", "data rejected"),
        ("130", "stopped by SIGINT"),
    ]:
        assert re.search(rf"^ +{code} +{meaning}", codes, re.MULTILINE), codes


def test_every_option_and_argument_of_every_command_has_help_text():
    missing = [
        f"{parser.prog} {action.option_strings or action.dest}"
        for parser in _parsers(_build_parser())
        for action in parser._actions
        if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction))
        and not action.help
    ]
    assert not missing, missing


def test_model_help_lists_every_built_in_model():
    listed = set(MODEL_HELP.partition("(")[2].partition(")")[0].split(", "))
    assert listed == set(MODEL_BUILDERS)


# Words of an option's name that make it a path (`--data-dir`, `--summary-json`, `RUN`).
PATH_WORDS = {"config", "dir", "output", "data", "source", "run", "json", "root"}
PATH_METAVARS = {"FILE", "DIR", "PATH", "RUN", "URI"}


def _path_arguments():
    for parser in _parsers(_build_parser()):
        for action in parser._actions:
            takes_value = action.nargs != 0 and not isinstance(action, argparse._SubParsersAction)
            if takes_value and (
                action.type is pathlib.Path or PATH_WORDS & set(action.dest.split("_"))
            ):
                yield parser, action


def test_every_path_argument_says_whether_it_is_a_file_or_a_folder():
    arguments = list(_path_arguments())
    vague = [
        f"{parser.prog} {action.option_strings or action.dest}: {action.help}"
        for parser, action in arguments
        if not re.search(r"\b(file|folder)\b", action.help)
    ]
    unnamed = [
        f"{parser.prog} {action.option_strings or action.dest}: {action.metavar}"
        for parser, action in arguments
        if action.metavar not in PATH_METAVARS
    ]

    assert len(arguments) > 15  # every command's paths were found, not none
    assert not vague, vague
    assert not unnamed, unnamed


def test_schema_infer_help_says_output_is_a_file_and_data_is_examples():
    result = _cli("schema", "infer", "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert "--output FILE the schema file to write (a .pbtxt file, not a folder)" in text
    assert "--data PATH examples in the pipeline layout" in text
