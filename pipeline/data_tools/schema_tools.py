"""Bootstraps a schema for a new dataset with TFDV, for a person to curate.

TFDV infers types, presence and shapes. We also copy the observed value ranges
into the schema, because ranges are what catches a pipeline upstream changing
its pixel scaling; a person should still review them (see the README) before
ExampleValidator relies on them. The first run of a dataset without a schema
bootstraps it (`schema_to_bootstrap`, `bootstrap_schema`); `tpu-pipeline schema
infer` does it again on demand.
"""

from __future__ import annotations

import datetime
import os
import pathlib

import tensorflow as tf
import tensorflow_data_validation as tfdv
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2, statistics_pb2

from tpu_pipeline import schemas
from tpu_pipeline.common.atomic_file import write_new_text, write_text
from tpu_pipeline.common.config import ConfigError, DatasetConfig
from tpu_pipeline.common.work_dirs import WorkDirs
from tpu_pipeline.components.contract import (
    IMAGE_FORMAT_FEATURE,
    IMAGE_HEIGHT_FEATURE,
    IMAGE_WIDTH_FEATURE,
    SOURCE_FOLDER_FEATURE,
    SPAN_FEATURE,
)
from tpu_pipeline.components.example_gen.errors import DataFormatError
from tpu_pipeline.components.example_gen.images import MAX_IMAGE_SIDE, STORED_FORMATS
from tpu_pipeline.components.example_gen.provenance import recorded_features
from tpu_pipeline.components.example_gen.tfrecords import read_records
from tpu_pipeline.pipeline.local.progress import LiveStatus, read_every_record

# Where TFDV writes the statistics a schema is inferred from, removed once they are read.
STATISTICS_DIRS = WorkDirs("schema-statistics", "schema statistics folder")


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
    # TFDV writes the statistics to a file first, by default in a folder of its own that it
    # never removes: one more in the temporary folder for every schema inferred.
    with STATISTICS_DIRS.owned() as work_dir:
        statistics = tfdv.generate_statistics_from_tfrecord(
            data_location=data_pattern, output_path=str(work_dir / "data_stats.tfrecord")
        )
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
    _bound_photos_by_what_is_read(schema)
    _any_span_or_folder(schema)
    return schema


def _any_span_or_folder(schema: schema_pb2.Schema) -> None:
    """The provenance features as PROVENANCE_SCHEMA_FEATURES says, not as the data read so
    far: the observed spans (1 to 2) or folders would reject the next one."""
    for feature in schema.feature:
        if feature.name in PROVENANCE_SCHEMA_FEATURES:
            _drop_shared_domain(schema, feature)
            wanted = PROVENANCE_SCHEMA_FEATURES[feature.name]
            feature.CopyFrom(text_format.Parse(wanted, schema_pb2.Schema()).feature[0])


def _drop_shared_domain(schema: schema_pb2.Schema, feature: schema_pb2.Feature) -> None:
    """Removes the shared string domain TFDV made of the values `feature` had in the sample."""
    if feature.HasField("domain"):
        shared = [d for d in schema.string_domain if d.name != feature.domain]
        del schema.string_domain[:]
        schema.string_domain.extend(shared)
        feature.ClearField("domain")


def _bound_photos_by_what_is_read(schema: schema_pb2.Schema) -> None:
    """Photo sizes and formats bounded by what ExampleGen reads, not by what the sample held.

    The observed range of a sample (130 to 1984 pixels) would reject the next
    folder's larger or smaller photos; any side from 1 to `MAX_IMAGE_SIDE` decodes,
    and any of the formats ExampleGen stores. Images that are odd among the rest
    (tiny, another format) are flagged at ingest instead (`components/example_gen`).
    """
    for feature in schema.feature:
        if feature.name in (IMAGE_HEIGHT_FEATURE, IMAGE_WIDTH_FEATURE):
            feature.int_domain.min, feature.int_domain.max = 1, MAX_IMAGE_SIDE
            feature.int_domain.is_categorical = False
        elif feature.name == IMAGE_FORMAT_FEATURE:
            _drop_shared_domain(schema, feature)
            feature.string_domain.value[:] = STORED_FORMATS


def write_schema(
    schema: schema_pb2.Schema, path: pathlib.Path, overwrite: bool = False
) -> pathlib.Path | None:
    """Writes `schema` as text, whole; a curated schema already there is kept.

    With `overwrite` the file there is replaced, and kept beside it under a new name
    (`<name>.replaced-<time>`): a curated schema is a person's work, never lost.

    Returns:
      Where the replaced schema was kept, or None if there was none.

    Raises:
      SchemaExistsError: `path` exists and `overwrite` is off.
      IsADirectoryError: `path` is a folder; it must name the schema file.
    """
    if path.is_dir():
        raise IsADirectoryError(
            f"{path} is a folder; name the schema file, e.g. {path}/schema.pbtxt"
        )
    text = text_format.MessageToString(schema)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not overwrite or not path.exists():
        try:
            write_new_text(path, text)
        except FileExistsError:
            raise SchemaExistsError(
                f"{path} exists; pass --force to replace the curated schema"
            ) from None
        return None
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    kept = path.with_name(f"{path.name}.replaced-{stamp}")
    os.link(path, kept)  # the old content under a new name; fails rather than overwrite
    write_text(path, text)
    return kept


def _nearest_existing(path: pathlib.Path) -> pathlib.Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def schema_to_bootstrap(dataset: DatasetConfig) -> pathlib.Path | None:
    """Where this run must write the dataset's first schema; None when it has one.

    Checked before any component runs, so a schema that could not be written
    stops the run at once rather than after ExampleGen.

    Raises:
      ConfigError: `dataset.schema_file` names a folder, or the schema would go
        where it cannot or should not be written: into an installed package's
        `schemas/`, or a folder this user cannot write.
    """
    if dataset.schema_file and "://" in dataset.schema_file:
        return None  # a remote schema is curated where it lives; ImportSchemaGen reads it
    path = dataset.resolved_schema_file
    if path.is_dir():
        raise ConfigError(
            f"dataset.schema_file: {path} is a folder; it names the schema file itself, "
            f"e.g. {path / 'schema.pbtxt'}"
        )
    if path.exists():
        return None
    if not dataset.schema_file and not schemas.in_source_checkout():
        raise ConfigError(
            f"dataset {dataset.name!r} has no schema, and {schemas.SCHEMAS_DIR} belongs to an "
            "installed package (a schema written there is lost on the next install): set "
            "dataset.schema_file to the file the first run should write, e.g. "
            f"schemas/{dataset.name}/schema.pbtxt in your own project"
        )
    folder = _nearest_existing(path.parent)
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(
            f"dataset.schema_file: cannot write {path} ({folder} is not a writable folder); "
            "set dataset.schema_file to a file in a folder you can write"
        )
    return path


def check_pixel_feature_type(dataset: DatasetConfig) -> None:
    """Stops a run whose curated schema declares the pixel feature other than ExampleGen stores it.

    ExampleGen stores photos and 8-bit pixels (IDX, CIFAR-10 binary) as bytes; a schema
    from before IDX and CIFAR-10 pixels were kept as bytes still says FLOAT, and every
    example would be an anomaly after a full ExampleGen run. Checked before any component.

    Raises:
      ConfigError: names the schema file, both types and how to bootstrap it again.
    """
    stores_bytes = dataset.stores_encoded_images or dataset.stores_8bit_pixels
    path = dataset.resolved_schema_file
    if not stores_bytes or "://" in str(dataset.schema_file or "") or not path.is_file():
        return
    schema = tfdv.load_schema_text(str(path))
    declared = next((f.type for f in schema.feature if f.name == dataset.pixel_feature), None)
    # A missing feature or type is ExampleValidator's to report.
    if declared in (None, schema_pb2.TYPE_UNKNOWN, schema_pb2.BYTES):
        return
    kind = "8-bit pixels (whole 0-255 values)" if dataset.stores_8bit_pixels else "encoded images"
    raise ConfigError(
        f"{path}: declares pixel feature {dataset.pixel_feature!r} as "
        f"{schema_pb2.FeatureType.Name(declared)}, but ExampleGen stores format "
        f"{dataset.format}'s {kind} as BYTES; bootstrap the schema again: move {path} away "
        "and run (the first run infers one), or run `tpu-pipeline schema infer --force` "
        "on this dataset's examples"
    )


# The schema features of what ExampleGen records about each example's origin
# (components/example_gen/provenance.py): optional, so the same schema serves runs that
# record nothing, and unbounded, since the next span or folder is not known yet.
PROVENANCE_SCHEMA_FEATURES = {
    SPAN_FEATURE: f"""feature {{
  name: "{SPAN_FEATURE}"
  type: INT
  int_domain {{ min: 0 }}
  presence {{ min_count: 0 }}
  value_count {{ min: 1 max: 1 }}
}}""",
    SOURCE_FOLDER_FEATURE: f"""feature {{
  name: "{SOURCE_FOLDER_FEATURE}"
  type: BYTES
  presence {{ min_count: 0 }}
  value_count {{ min: 1 max: 1 }}
}}""",
}


def check_provenance_features(dataset: DatasetConfig) -> None:
    """Stops a run before ExampleGen when its curated schema lacks a feature ExampleGen will
    add to every example (a span, a source folder): ExampleValidator would find a new
    column in every example.

    Raises:
      ConfigError: names the schema file and the feature to add.
    """
    path = dataset.resolved_schema_file
    recorded = recorded_features(dataset)
    if not recorded or "://" in str(dataset.schema_file or "") or not path.is_file():
        return
    declared = {f.name for f in tfdv.load_schema_text(str(path)).feature}
    missing = [name for name in recorded if name not in declared]
    if missing:
        raise ConfigError(
            f"{path}: has no {missing[0]!r} feature, which ExampleGen adds to every example "
            f"when {recorded[missing[0]]}; add it to the schema: "
            + " ".join(" ".join(PROVENANCE_SCHEMA_FEATURES[name].split()) for name in missing)
        )


def describe_schema(schema: schema_pb2.Schema) -> str:
    """Each feature's domain and shape in a few words, e.g. `pixels 0 to 16, shape [64]`."""
    parts = []
    for feature in schema.feature:
        if feature.HasField("float_domain"):
            domain = f"{feature.float_domain.min:g} to {feature.float_domain.max:g}"
        elif feature.HasField("int_domain"):
            domain = f"{feature.int_domain.min} to {feature.int_domain.max}"
        else:
            domain = schema_pb2.FeatureType.Name(feature.type).lower()
        if feature.HasField("shape"):
            domain += f", shape [{', '.join(str(d.size) for d in feature.shape.dim)}]"
        parts.append(f"{feature.name} {domain}")
    return "; ".join(parts)


def bootstrap_schema(examples_uri: str, path: pathlib.Path) -> schema_pb2.Schema:
    """Infers a schema from every split ExampleGen wrote and writes it to `path` (never over one).

    Every split, not only the training one: the eval split's values must fall in
    the inferred ranges too, or the run that bootstraps the schema would reject
    its own data.
    """
    schema = infer_schema(os.path.join(examples_uri, "Split-*", "*"))
    write_schema(schema, path)
    return schema
