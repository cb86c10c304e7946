"""One ingest of a photo folder, timed inside its process: ExampleGen, or the work's floor.

    python -m benchmarks.ingest example_gen|floor PHOTOS_DIR SIDE OUTPUT_DIR

Prints one JSON line: images, seconds (imports excluded), source and output bytes.
`example_gen` runs our ExampleGen executor on the image folder at SIDE x SIDE x 3, as
the pipeline runs it (hash split); `floor` reads every file and writes its bytes
into gzipped TFRecords in one Python loop, the least any ingest must do.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
import time

from tpu_pipeline import common  # noqa: F401 (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402

from benchmarks.data import photo_dataset  # noqa: E402
from tpu_pipeline.common.config import DatasetConfig  # noqa: E402
from tpu_pipeline.common.tfx_api import example_gen_pb2, proto_utils, standard_artifacts  # noqa: E402
from tpu_pipeline.common.tfx_api import standard_component_specs as specs  # noqa: E402
from tpu_pipeline.components.example_gen.executor import (  # noqa: E402
    SourceExampleGenExecutor,
    dataset_custom_config,
)


def example_gen(
    dataset: DatasetConfig, input_base: pathlib.Path, pattern: str, output: pathlib.Path
) -> None:
    """Our ExampleGen executor on the files `pattern` matches, hash split as the pipeline does
    (sources with their own train and test splits keep them)."""
    examples = standard_artifacts.Examples()
    examples.uri = str(output)
    split = example_gen_pb2.SplitConfig.Split
    outputs = example_gen_pb2.Output(
        split_config=example_gen_pb2.SplitConfig(
            splits=[split(name="train", hash_buckets=4), split(name="eval", hash_buckets=1)]
        )
    )
    inputs = example_gen_pb2.Input(
        splits=[example_gen_pb2.Input.Split(name="all", pattern=pattern)]
    )
    properties = {
        specs.INPUT_BASE_KEY: str(input_base),
        specs.INPUT_CONFIG_KEY: proto_utils.proto_to_json(inputs),
        specs.OUTPUT_CONFIG_KEY: proto_utils.proto_to_json(outputs),
        specs.CUSTOM_CONFIG_KEY: proto_utils.proto_to_json(dataset_custom_config(dataset)),
        specs.OUTPUT_DATA_FORMAT_KEY: example_gen_pb2.FORMAT_TF_EXAMPLE,
        specs.OUTPUT_FILE_FORMAT_KEY: example_gen_pb2.FORMAT_TFRECORDS_GZIP,
    }
    SourceExampleGenExecutor().Do({}, {specs.EXAMPLES_KEY: [examples]}, properties)


def run_example_gen(photos: pathlib.Path, side: int, output: pathlib.Path) -> None:
    example_gen(photo_dataset((side, side, 3)), photos, "*/*", output)


def run_floor(photos: pathlib.Path, output: pathlib.Path) -> None:
    output.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(output / "floor.tfrecord.gz"), options="GZIP") as writer:
        for path in sorted(photos.glob("*/*")):
            feature = {
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[path.read_bytes()]))
            }
            writer.write(
                tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
            )


def main(kind: str, photos: pathlib.Path, side: int, output: pathlib.Path) -> None:
    files = [path for path in photos.glob("*/*") if path.is_file()]
    started = time.perf_counter()
    if kind == "floor":
        run_floor(photos, output)
    else:
        run_example_gen(photos, side, output)
    seconds = time.perf_counter() - started
    written = [path for path in output.rglob("*") if path.is_file()]
    print(
        json.dumps(
            {
                "images": len(files),
                "seconds": seconds,
                "source_bytes": sum(path.stat().st_size for path in files),
                "output_bytes": sum(path.stat().st_size for path in written),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], pathlib.Path(sys.argv[2]), int(sys.argv[3]), pathlib.Path(sys.argv[4]))
