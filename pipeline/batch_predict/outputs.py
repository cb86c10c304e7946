"""The predictions file: its format follows its extension, and it appears whole or not at all.

Beam writes one file (one shard) in a hidden folder beside the output, and only
a finished job renames it onto `--output` (`tpu_pipeline.common.owned_paths.owned_file`, which
replaces only a file an earlier job wrote, never one of the user's): on a local
disk the rename replaces an existing file atomically, so a reader sees the old
predictions or the new ones, never half of them; on an object store the file is
one object, which appears whole. A failed or interrupted job leaves the old file.
"""

from __future__ import annotations

import os

import apache_beam as beam

from tpu_pipeline.common.config import ConfigError
from tpu_pipeline.pipeline.batch_predict.predictions import RowFormat

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
    """Beam transform: batches of Predictions into the one file `path`, as its extension says.

    A text format writes each batch as one block of lines (Beam adds the newline
    after it), so per record only the formatting runs, not a Beam step.
    """
    extension = output_extension(path)
    one_file = {"num_shards": 1, "shard_name_template": ""}
    text = {".csv": rows.csv_lines, ".jsonl": rows.json_lines}
    header = {"header": rows.csv_header()} if extension == ".csv" else {}

    @beam.ptransform_fn
    def _write(batches):
        if extension == ".tfrecord":
            logs = batches | "Format" >> beam.FlatMap(rows.prediction_logs)
            return logs | "Write" >> beam.io.WriteToTFRecord(path, **one_file)
        blocks = batches | "Format" >> beam.Map(text[extension])
        return blocks | "Write" >> beam.io.WriteToText(path, **header, **one_file)

    return _write()
