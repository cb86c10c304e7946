"""Synthetic image examples and the Beam work the pipeline does on them.

Records have the layout ExampleGen writes (gzipped TFRecord of tf.Example with
a flat float pixel list and an int64 label), so the Trainer's input path and
the Transform and StatisticsGen analyses see what they see in a real run.
`analyze` runs TFDV's statistics and TFT's analysis the way the StatisticsGen
and Transform executors do (a TFXIO source into `GenerateStatistics` or
`AnalyzeDataset`), one Beam pipeline each, so each cost is timed alone.
"""

from __future__ import annotations

import functools
import json
import pathlib
import shutil
import sys
import time

import apache_beam as beam
import numpy as np
import tensorflow as tf
import tensorflow_data_validation as tfdv
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam
from apache_beam.options.pipeline_options import PipelineOptions
from tensorflow_transform.tf_metadata import dataset_metadata, metadata_io, schema_utils
from tfx_bsl.public import tfxio

from tpu_pipeline.common.config import BUILTIN_DATASETS, DatasetConfig
from tpu_pipeline.components.images.examples import pixel_feature_spec
from tpu_pipeline.components.preprocessing import preprocessing_fn

MNIST_SHAPED = DatasetConfig(**{**BUILTIN_DATASETS["mnist"], "data_dir": None})
CIFAR_SHAPED = DatasetConfig(
    name="cifar10",
    image_shape=(32, 32, 3),
    pixel_feature="pixels",
    label_feature="label",
    num_classes=10,
)
# Distinct examples written; larger files repeat them (statistics cost does not
# depend on the values, and writing protos in Python is slow).
DISTINCT_EXAMPLES = 1000


def raw_schema(dataset: DatasetConfig):
    """The raw feature schema: the pixels (a float list or one encoded photo) and the label."""
    return schema_utils.schema_from_feature_spec(
        {
            dataset.pixel_feature: pixel_feature_spec(dataset),
            dataset.label_feature: tf.io.FixedLenFeature([1], tf.int64),
        }
    )


def write_examples(path: pathlib.Path, dataset: DatasetConfig, count: int, seed: int = 0) -> None:
    """Writes `count` gzipped tf.Examples with pixels in [-0.5, 0.5] and random labels."""
    rng = np.random.default_rng(seed)
    distinct = min(count, DISTINCT_EXAMPLES)
    pixels = rng.uniform(-0.5, 0.5, (distinct, dataset.pixel_count)).astype(np.float32)
    labels = rng.integers(0, dataset.num_classes, distinct)
    serialized = [
        tf.train.Example(
            features=tf.train.Features(
                feature={
                    dataset.pixel_feature: tf.train.Feature(float_list=tf.train.FloatList(value=p)),
                    dataset.label_feature: tf.train.Feature(
                        int64_list=tf.train.Int64List(value=[y])
                    ),
                }
            )
        ).SerializeToString()
        for p, y in zip(pixels, labels, strict=True)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path), options="GZIP") as writer:
        for index in range(count):
            writer.write(serialized[index % distinct])


def _source(pattern: str, dataset: DatasetConfig) -> tfxio.TFExampleRecord:
    return tfxio.TFExampleRecord(pattern, schema=raw_schema(dataset))


def build_transform_graph(
    pattern: str,
    dataset: DatasetConfig,
    output_dir: pathlib.Path,
    beam_args: list[str] | None = None,
) -> tft.TFTransformOutput:
    """Analyzes the records with our preprocessing_fn and writes the transform graph."""
    # A rerun replaces the graph: TFT refuses to publish over an existing one.
    shutil.rmtree(output_dir / "graph", ignore_errors=True)
    source = _source(pattern, dataset)
    fn = functools.partial(
        preprocessing_fn, custom_config={"dataset": dataset.model_dump(mode="json")}
    )
    with beam.Pipeline(options=PipelineOptions(beam_args or [])) as pipeline:
        with tft_beam.Context(temp_dir=str(output_dir / "tmp")):
            records = pipeline | "Read" >> source.BeamSource()
            transform_fn = (records, source.TensorAdapterConfig()) | tft_beam.AnalyzeDataset(fn)
            _ = transform_fn | tft_beam.WriteTransformFn(str(output_dir / "graph"))
    # The Trainer parses raw records with the raw schema saved beside the graph, as TFX does.
    metadata_io.write_metadata(
        dataset_metadata.DatasetMetadata(raw_schema(dataset)),
        str(output_dir / "graph" / tft.TFTransformOutput.RAW_METADATA_DIR),
    )
    return tft.TFTransformOutput(str(output_dir / "graph"))


def compute_statistics(
    pattern: str, dataset: DatasetConfig, beam_args: list[str] | None = None
) -> None:
    """What StatisticsGen computes: TFDV statistics over every record."""
    with beam.Pipeline(options=PipelineOptions(beam_args or [])) as pipeline:
        _ = (
            pipeline
            | "Read" >> _source(pattern, dataset).BeamSource()
            | tfdv.GenerateStatistics(tfdv.StatsOptions())
            | beam.combiners.Count.Globally()
        )


def analyze(
    pattern: str, dataset: DatasetConfig, workdir: pathlib.Path, beam_args: list[str]
) -> dict:
    """Seconds for StatisticsGen's and Transform's analyses of the same records."""
    started = time.perf_counter()
    compute_statistics(pattern, dataset, beam_args)
    statistics_s = time.perf_counter() - started
    started = time.perf_counter()
    build_transform_graph(pattern, dataset, workdir, beam_args)
    return {"statistics_s": statistics_s, "transform_s": time.perf_counter() - started}


if __name__ == "__main__":
    # python -m benchmarks.data DATASET RECORDS WORKDIR [BEAM_ARG ...]: one scale measurement
    # in a process of its own, so the caller can read its peak memory.
    name, records, workdir, *beam_args = sys.argv[1:]
    shaped = {"mnist": MNIST_SHAPED, "cifar10": CIFAR_SHAPED}[name]
    print(json.dumps(analyze(records, shaped, pathlib.Path(workdir), beam_args)), flush=True)


def write_photo_folder(
    folder: pathlib.Path,
    count: int,
    classes: int = 10,
    size: tuple[int, int] = (533, 400),
    seed: int = 0,
) -> list[pathlib.Path]:
    """`count` JPEG photos (width x height `size`) in one sub-folder per class.

    Smooth colour fields with noise and a bright disc compress like real photos
    (tens of KB at 533x400), not like pure noise; distinct seeds make each file
    distinct.
    """
    from PIL import Image

    rng = np.random.default_rng(seed)
    width, height = size
    rows, columns = np.mgrid[0:height, 0:width]
    paths = []
    for index in range(count):
        label = index % classes
        colour = rng.uniform(40, 215, 3)
        field = colour + 30 * np.sin(columns[..., None] / (20 + label) + rng.uniform(0, 6))
        cy, cx = rng.uniform(0.2, 0.8, 2) * (height, width)
        disc = ((rows - cy) ** 2 + (columns - cx) ** 2) < (min(size) / (4 + label % 3)) ** 2
        field[disc] = 255 - colour
        field += rng.normal(0, 6, field.shape)
        path = folder / f"class_{label}" / f"photo_{index:06d}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.clip(field, 0, 255).astype(np.uint8)).save(path, quality=90)
        paths.append(path)
    return paths


def write_encoded_examples(path: pathlib.Path, photos: list[pathlib.Path], classes: int) -> None:
    """The photos as ExampleGen stores them: each file's bytes and its class folder's index."""
    names = sorted({photo.parent.name for photo in photos})
    with tf.io.TFRecordWriter(str(path), options="GZIP") as writer:
        for photo in photos:
            feature = {
                "image": tf.train.Feature(
                    bytes_list=tf.train.BytesList(value=[photo.read_bytes()])
                ),
                "label": tf.train.Feature(
                    int64_list=tf.train.Int64List(value=[names.index(photo.parent.name) % classes])
                ),
            }
            writer.write(
                tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
            )


def photo_dataset(image_shape: tuple[int, int, int], classes: int = 10) -> DatasetConfig:
    """An image-folder dataset of colour photos resized to `image_shape`."""
    return DatasetConfig(
        name="photos",
        format="image_folder",
        image_shape=image_shape,
        pixel_feature="image",
        label_feature="label",
        num_classes=classes,
        source={"resize": True, "label_names": photo_class_names(classes)},
    )


def photo_class_names(classes: int) -> list[str]:
    """The class folders `write_photo_folder` makes, in label order."""
    return [f"class_{label}" for label in range(classes)]
