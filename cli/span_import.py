"""Imports raw files as a new span (`span-N/`) of a dataset, checked before they land.

A scheduled pipeline whose `file_pattern` holds `{SPAN}` (e.g.
`span-{SPAN}/*.npz`) reads the latest span. Importing reads every record of
the new files with the same readers ExampleGen uses, so bad input is refused
before it can become the latest span; the span folder then appears at once
(written aside and renamed) and an existing span is never replaced.
"""

from __future__ import annotations

import fnmatch
import pathlib
import re
import shutil
from typing import Any, TextIO

from tpu_pipeline.common.atomic_folder import new_folder
from tpu_pipeline.common.config import ConfigError, DatasetConfig
from tpu_pipeline.components.example_gen.errors import DataFormatError
from tpu_pipeline.pipeline.local.progress import LiveStatus, read_every_record

SPAN_TOKEN = "{SPAN}"


def span_layout(file_pattern: str) -> tuple[str, str]:
    """Splits `span-{SPAN}/*.npz` into the span folder template and the pattern inside it."""
    folder, _, inner = file_pattern.partition("/")
    if SPAN_TOKEN not in folder or not inner or SPAN_TOKEN in inner:
        raise ConfigError(
            f"dataset.file_pattern {file_pattern!r} has no span folder; "
            f"set it to e.g. 'span-{SPAN_TOKEN}/{file_pattern}' to import spans"
        )
    return folder, inner


def span_file_pattern(recognized: dict[str, Any]) -> str:
    """The `file_pattern` of a recognised dataset whose files are imported as spans: its
    layout inside `span-{SPAN}/` (split folders are kept, read as one span)."""
    from tpu_pipeline.components.example_gen.formats import FORMATS

    inner = recognized.get("file_pattern") or FORMATS[recognized["format"]].default_pattern
    if recognized.get("split_patterns"):
        inner = "*/*/*"  # split/class/photo: the split folders' photos, every one imported
    return f"span-{SPAN_TOKEN}/{inner}"


def next_span(data_root: pathlib.Path, folder_template: str) -> int:
    """One more than the highest span in `data_root`, or 1 for the first."""
    head, _, tail = folder_template.partition(SPAN_TOKEN)
    number = re.compile(re.escape(head) + r"(\d+)" + re.escape(tail) + "$")
    spans = [int(m[1]) for p in data_root.glob("*") if (m := number.match(p.name))]
    return max(spans, default=0) + 1


def check_files(pattern: str, dataset: DatasetConfig, status: LiveStatus | None = None) -> int:
    """Reads every record of the files matching `pattern`; returns how many examples they hold.

    Args:
      pattern: the files to check.
      dataset: how to read them.
      status: shows the file and the records read so far, if given.

    Raises:
      DataFormatError: the first bad file or record, by name.
    """
    from tpu_pipeline.components.example_gen.examples import ExampleBuilder
    from tpu_pipeline.components.example_gen.formats import list_inputs, source_format

    source = source_format(dataset)
    builder = ExampleBuilder(dataset)
    paths = list_inputs(pattern, source)
    return read_every_record(paths, lambda path: source.read(path, builder), status, "checking")


def import_span(
    dataset: DatasetConfig,
    source: pathlib.Path,
    span: int | None = None,
    progress: TextIO | None = None,
) -> tuple[pathlib.Path, int]:
    """Checks `source` (a file or folder) and copies it into `data_dir/span-N/`.

    Args:
      dataset: the dataset whose `data_dir` and `file_pattern` define the layout.
      source: the new raw files: a folder (its files matching the pattern
        inside the span folder are imported) or one file.
      span: the span number; default: one more than the latest.
      progress: where to show the check's progress over files and records, if anywhere.

    Returns:
      The new span folder and the number of examples it holds.

    Raises:
      DataFormatError: bad input; nothing was written.
      FileExistsError: the span exists; it was left as it was.
      ConfigError: the dataset has no data_dir or no `{SPAN}` folder in its pattern.
    """
    if dataset.data_dir is None:
        raise ConfigError(f"dataset {dataset.name!r}: set dataset.data_dir to import spans")
    data_root = pathlib.Path(dataset.data_dir)
    from tpu_pipeline.components.example_gen.formats import file_pattern

    folder_template, inner = span_layout(file_pattern(dataset))
    if source.is_dir():
        files = sorted(path for path in source.glob(inner) if path.is_file())
        pattern = str(source / inner)
    elif fnmatch.fnmatch(source.name, inner):
        files, pattern = [source], str(source)
    else:
        raise DataFormatError(f"{source}: does not match {inner!r}, the files a span holds")
    status = LiveStatus(progress) if progress else None
    if status:
        status.start(f"checking {pattern}")
    try:
        count = check_files(pattern, dataset, status)
    finally:
        if status:
            status.stop()
    number = span if span is not None else next_span(data_root, folder_template)
    destination = data_root / folder_template.replace(SPAN_TOKEN, str(number))
    with new_folder(destination) as partial:
        for path in files:
            target = partial / (path.relative_to(source) if source.is_dir() else path.name)
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                shutil.copyfile(path, target)
            except OSError as error:
                raise DataFormatError(f"{path}: cannot copy the file: {error.strerror}") from None
    return destination, count
