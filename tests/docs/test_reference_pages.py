"""The reference pages under docs/reference/ say what the code says now.

`docs/gen_reference.py` writes them from the typed configuration, the argparse parser
and the run summary's dataclasses; the pages are committed so that they read on GitHub
and build offline. A field, default or flag changed without running the generator fails
here, and the checks below read the committed pages against the code directly, so a page
the generator itself got wrong fails too.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib.util
import pathlib
import re
import sys

import pytest

from tests.test_layers import LAYERS
from tpu_pipeline.cli.main import _build_parser
from tpu_pipeline.common.config import REPO_ROOT, PipelineConfig

REFERENCE = REPO_ROOT / "docs" / "reference"


def _generator():
    spec = importlib.util.spec_from_file_location(
        "gen_reference", REPO_ROOT / "docs" / "gen_reference.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generator():
    return _generator()


def test_the_committed_reference_pages_are_what_the_code_generates_now(generator):
    stale = [
        str(path.relative_to(REPO_ROOT))
        for path, text in generator.render().items()
        if not path.exists() or path.read_text() != text
    ]

    assert not stale, (
        f"{stale} differ from the code: run `.venv/bin/python docs/gen_reference.py` and "
        "commit the pages"
    )


def test_the_check_notices_a_page_that_no_longer_matches(generator, tmp_path, monkeypatch):
    monkeypatch.setattr(generator, "REFERENCE_DIR", tmp_path)
    generator.main([])
    page = tmp_path / "configuration.md"
    page.write_text(page.read_text().replace('`"cnn_bn"`', '`"resnet20"`'))

    assert generator.stale_pages() == [page]
    assert generator.main(["--check"]) == 1


def _config_fields(model, prefix=""):
    """Every field of `model` and of the sections below it, as dotted paths."""
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        yield path, field
        for inner in _sections_in(field.annotation):
            key = "<key>." if _is_map(field.annotation) else ""
            yield from _config_fields(inner, f"{path}.{key}")


def _is_map(annotation) -> bool:
    return getattr(annotation, "__origin__", None) is dict


def _sections_in(annotation):
    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found = []
    for argument in getattr(annotation, "__args__", ()) or ():
        found += _sections_in(argument)
    return found


def _rows(page: str) -> dict[str, str]:
    """A table page's rows by the code span in their first cell."""
    rows = {}
    for line in page.splitlines():
        match = re.match(r"\| `([^`]+)` \|(.*)", line)
        if match:
            rows.setdefault(match.group(1), match.group(2))
    return rows


def _first_table(text: str) -> str:
    """The first Markdown table of `text`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return "\n".join(lines[start:end])


def test_every_configuration_field_has_a_row_with_its_default_and_description():
    rows = _rows((REFERENCE / "configuration.md").read_text())

    for path, field in _config_fields(PipelineConfig):
        assert path in rows, f"{path} is a configuration field the reference leaves out"
        if field.description:
            first_words = " ".join(field.description.split()[:4]).replace("<", "&lt;")
            assert first_words.replace(">", "&gt;") in rows[path], path
        if not field.is_required() and field.default_factory is None:
            default = field.default
            if isinstance(default, (bool, int, float, str)) and not isinstance(default, type):
                shown = str(default).lower() if isinstance(default, bool) else default
                shown = f'"{default}"' if isinstance(default, str) else shown
                assert f"`{shown}`" in rows[path], (path, default)


def _commands(parser: argparse.ArgumentParser):
    """Every (sub)command parser of the CLI."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _commands(sub)


def test_every_command_and_flag_of_the_cli_is_in_the_cli_reference():
    page = (REFERENCE / "cli.md").read_text()
    sections = dict(re.findall(r"^#+ `([^`]+)` \{#[^}]+\}\n(.*?)(?=^#+ `|\Z)", page, re.M | re.S))

    for command in _commands(_build_parser()):
        assert command.prog in sections, f"`{command.prog}` is missing from the CLI reference"
        for action in command._actions:
            if isinstance(action, argparse._SubParsersAction) or not action.option_strings:
                continue
            flags = ", ".join(action.option_strings)
            assert f"| `{flags}` |" in sections[command.prog], (command.prog, flags)


def _summary_keys() -> set[str]:
    """The fields `RunSummary.to_json` dumps: its own and every part's (importing the module
    loads TFX and TensorFlow)."""
    from tpu_pipeline.pipeline.results.run_summary import RunSummary

    return {field.name for field in dataclasses.fields(RunSummary)}


def test_every_key_of_the_summary_json_is_in_its_reference():
    top = (REFERENCE / "summary-json.md").read_text().split("\n## ")[1]
    rows = _rows(_first_table(top))

    keys = _summary_keys()

    assert keys - set(rows) == set(), "summary keys the reference leaves out"
    assert set(rows) - keys == set(), "keys the reference names that the summary has not"


def test_the_summary_reference_names_the_dataclasses_the_summary_holds():
    from tpu_pipeline.pipeline.results.run_summary import RunSummary

    page = (REFERENCE / "summary-json.md").read_text()
    annotations = " ".join(str(field.type) for field in dataclasses.fields(RunSummary))

    for name in ("ComponentResult", "ClassMetrics", "SliceMetrics", "Calibration"):
        if name in annotations:
            assert f"## `{name}`" in page, name


def test_the_architecture_page_names_every_module_that_imports_tfx_directly():
    page = (REPO_ROOT / "docs" / "architecture.md").read_text()
    listed = re.search(
        r"<!-- tfx-direct-imports.*?-->(.*?)<!-- /tfx-direct-imports -->", page, re.S
    )
    documented = set(re.findall(r"`([^`]+\.py)`", listed.group(1)))

    direct = set()
    for package in LAYERS:
        for path in (REPO_ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names = [node.module]
                if any(name.split(".")[0] == "tfx" for name in names):
                    direct.add(path.relative_to(REPO_ROOT).as_posix())
    # The two files the page names as the way TFX is imported.
    direct -= {"common/tfx_api.py", "common/fileio.py"}

    assert documented == direct


@pytest.mark.parametrize("page", sorted(p.name for p in pathlib.Path(REFERENCE).glob("*.md")))
def test_a_reference_page_says_it_is_generated(page):
    assert (REFERENCE / page).read_text().startswith("<!-- Generated by docs/gen_reference.py")
