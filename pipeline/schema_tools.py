"""Bootstraps a schema for a new dataset with TFDV, for a person to curate.

TFDV infers types, presence and shapes. We also copy the observed value ranges
into the schema, because ranges are what catches a pipeline upstream changing
its pixel scaling; a person should still review them (see the README) before
ExampleValidator relies on them.
"""

from __future__ import annotations

import pathlib

import tensorflow as tf
import tensorflow_data_validation as tfdv
from tensorflow_metadata.proto.v0 import schema_pb2, statistics_pb2

from components.example_gen.errors import DataFormatError
from components.example_gen.tfrecords import read_records
from pipeline.progress import LiveStatus, read_every_record


class SchemaExistsError(FileExistsError):
    """Refusing to overwrite a curated schema."""


def _observed_ranges(statistics: statistics_pb2.DatasetFeatureStatisticsList) -> dict[str, tuple]:
    ranges = {}
    for feature in statistics.datasets[0].features:
        name = feature.path.step[0] if feature.path.step else feature.name
        if feature.HasField("num_stats"):
            ranges[name] = (feature.num_stats.min, feature.num_stats.max)
    return ranges


def infer_schema(data_pattern: str, status: LiveStatus | None = None) -> schema_pb2.Schema:
    """Infers a schema from the TFRecord files of `tf.train.Example` matching `data_pattern`.

    Numeric features get the observed [min, max] as their domain; int features
    with few distinct values (labels) become categorical. `status`, if given,
    shows the work while it runs: the files and records read, then TFDV's pass.

    Raises:
      DataFormatError: no file matches, or a file is not whole (named, with the byte).
    """
    paths = sorted(tf.io.gfile.glob(data_pattern))
    if not paths:
        raise DataFormatError(f"{data_pattern}: no TFRecord file matches")
    if status:
        status.start(f"reading {data_pattern}")
    # Every file to its last byte first: TFDV's reader would take a cut file for a shorter
    # one, and a schema inferred from part of the data would be wrong silently.
    count = read_every_record(paths, read_records, status)
    if status:
        status.stop()
        status.print(f"read {count:,} records in {len(paths)} file(s) ({status.elapsed():.1f} s)")
        status.start(f"computing statistics of {count:,} records with TFDV")
    statistics = tfdv.generate_statistics_from_tfrecord(data_location=data_pattern)
    if status:
        status.stop()
        status.print(f"computed statistics with TFDV ({status.elapsed():.1f} s)")
    schema = tfdv.infer_schema(statistics, infer_feature_shape=True)
    ranges = _observed_ranges(statistics)
    for feature in schema.feature:
        if feature.name not in ranges:
            continue
        low, high = ranges[feature.name]
        if feature.type == schema_pb2.FLOAT:
            feature.float_domain.min, feature.float_domain.max = low, high
            feature.float_domain.disallow_nan = True
            feature.float_domain.disallow_inf = True
        elif feature.type == schema_pb2.INT:
            feature.int_domain.min, feature.int_domain.max = int(low), int(high)
            feature.int_domain.is_categorical = high - low < 1000
    return schema


def write_schema(schema: schema_pb2.Schema, path: pathlib.Path, overwrite: bool = False) -> None:
    """Writes `schema` as text; a curated schema already there is kept unless `overwrite`."""
    if path.exists() and not overwrite:
        raise SchemaExistsError(f"{path} exists; pass --force to replace the curated schema")
    path.parent.mkdir(parents=True, exist_ok=True)
    tfdv.write_schema_text(schema, str(path))
