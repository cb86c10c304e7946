"""The predictions file: its format follows its extension, and it appears whole or not at all.

Beam writes one file (one shard) under a hidden temporary name beside the
output, and only a finished job renames it onto `--output`: on a local disk
the rename replaces an existing file atomically, so a reader sees the old
predictions or the new ones, never half of them; on an object store the file is
one object, which appears whole. A failed or interrupted job leaves the old file.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterator

import apache_beam as beam

from common.config import ConfigError
from common.tfx_api import fileio
from pipeline.batch_predict.predictions import Prediction, RowFormat

OUTPUT_EXTENSIONS = (".csv", ".jsonl", ".tfrecord")


def output_extension(path: str) -> str:
    """The output format of `path`, by its extension.

    Raises:
      ConfigError: the extension is none of OUTPUT_EXTENSIONS.
    """
    extension = os.path.splitext(path)[1].lower()
    if extension not in OUTPUT_EXTENSIONS:
        raise ConfigError(
            f"--output {path}: the extension says the format; use one of "
            f"{', '.join(OUTPUT_EXTENSIONS)} (.tfrecord: TF Serving PredictionLog records)"
        )
    return extension


def write_predictions(path: str, rows: RowFormat) -> beam.PTransform:
    """Beam transform: Predictions into the one file `path`, in the format its extension says."""
    extension = output_extension(path)
    one_file = {"num_shards": 1, "shard_name_template": ""}
    formats: dict[str, tuple[Callable[[Prediction], object], Callable[[], beam.PTransform]]] = {
        ".csv": (
            rows.csv_line,
            lambda: beam.io.WriteToText(path, header=rows.csv_header(), **one_file),
        ),
        ".jsonl": (rows.json_line, lambda: beam.io.WriteToText(path, **one_file)),
        ".tfrecord": (rows.prediction_log, lambda: beam.io.WriteToTFRecord(path, **one_file)),
    }
    to_record, writer = formats[extension]

    @beam.ptransform_fn
    def _write(predictions):
        return predictions | "Format" >> beam.Map(to_record) | "Write" >> writer()

    return _write()


@contextlib.contextmanager
def replaced_when_done(output: str) -> Iterator[str]:
    """Yields a path in a hidden folder beside `output`, renamed onto it if the block succeeds.

    The folder also holds Beam's own temporary files, and goes however the block ends.
    The file keeps its name, so Beam picks no compression by its extension.
    """
    folder, name = os.path.split(output)
    scratch = os.path.join(folder, f".{name}.partial-{uuid.uuid4().hex[:12]}")
    fileio.makedirs(scratch)
    try:
        partial = os.path.join(scratch, name)
        yield partial
        fileio.rename(partial, output, overwrite=True)
    finally:
        fileio.rmtree(scratch)
