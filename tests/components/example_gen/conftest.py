"""Runs the real ExampleGen executors on small synthetic data."""

from __future__ import annotations

import pathlib
import struct

import pytest
import tensorflow as tf
from tfx.proto import example_gen_pb2
from tfx.types import standard_artifacts
from tfx.types import standard_component_specs as specs
from tfx.utils import proto_utils

from tpu_pipeline.cli.synthetic_data import synthetic_dataset
from tpu_pipeline.common.config import BUILTIN_DATA_DIR, DatasetConfig
from tpu_pipeline.components.example_gen.executor import (
    SourceExampleGenExecutor,
    dataset_custom_config,
)
from tpu_pipeline.components.example_gen.formats import file_pattern
from tpu_pipeline.pipeline.wiring.graph import example_gen_splits

# The real photos the repository ships (common/data/sign-language-digits/README.md).
SIGN_DIGITS = BUILTIN_DATA_DIR / "sign-language-digits"


def real_photos() -> list[pathlib.Path]:
    """The shipped photos, in file-name order (300 of 100x100 and one of 3024x3024)."""
    return sorted(SIGN_DIGITS.glob("*/*/*.JPG"))


def scan_middle(jpeg: bytes) -> int:
    """The byte offset halfway through a baseline JPEG's entropy-coded scan (SOS to EOI)."""
    start, end = jpeg.find(b"\xff\xda"), jpeg.rfind(b"\xff\xd9")  # start of scan, end of image
    assert 0 < start < end, "not a baseline JPEG with one scan"
    return start + (end - start) // 2


# A dataset of a format with the names the synthetic generator writes.
make_dataset = synthetic_dataset


def run_executor(
    dataset: DatasetConfig, input_base: pathlib.Path, output: pathlib.Path
) -> dict[str, list[tf.train.Example]]:
    """Runs the format's executor as TFX would; returns the examples of each output split."""
    examples = standard_artifacts.Examples()
    examples.uri = str(output)
    split = example_gen_pb2.SplitConfig.Split
    input_config = example_gen_pb2.Input(
        splits=[example_gen_pb2.Input.Split(name="all", pattern=file_pattern(dataset))]
    )
    output_config = example_gen_pb2.Output(
        split_config=example_gen_pb2.SplitConfig(
            splits=[split(name="train", hash_buckets=4), split(name="eval", hash_buckets=1)]
        )
    )
    if dataset.split_patterns is not None:  # the pipeline's own configs: one input per split
        configs = example_gen_splits(dataset)
        input_config, output_config = configs["input_config"], configs["output_config"]
    exec_properties = {
        specs.INPUT_BASE_KEY: str(input_base),
        specs.INPUT_CONFIG_KEY: proto_utils.proto_to_json(input_config),
        specs.OUTPUT_CONFIG_KEY: proto_utils.proto_to_json(output_config),
        specs.CUSTOM_CONFIG_KEY: proto_utils.proto_to_json(dataset_custom_config(dataset)),
        specs.OUTPUT_DATA_FORMAT_KEY: example_gen_pb2.FORMAT_TF_EXAMPLE,
        specs.OUTPUT_FILE_FORMAT_KEY: example_gen_pb2.FORMAT_TFRECORDS_GZIP,
    }
    SourceExampleGenExecutor().Do({}, {specs.EXAMPLES_KEY: [examples]}, exec_properties)
    return {name: read_split(output / f"Split-{name}") for name in ("train", "eval")}


def read_split(folder: pathlib.Path) -> list[tf.train.Example]:
    files = [str(path) for path in sorted(folder.glob("*.gz"))]
    records = tf.data.TFRecordDataset(files, compression_type="GZIP") if files else []
    return [tf.train.Example.FromString(record.numpy()) for record in records]


@pytest.fixture
def output_dir(tmp_path) -> pathlib.Path:
    return tmp_path / "examples"


def record_ends(data: bytes) -> list[int]:
    """The byte offset where each record of a plain TFRecord file ends (12-byte header,
    payload, 4-byte CRC), read from the length fields."""
    ends, offset = [], 0
    while offset < len(data):
        (length,) = struct.unpack_from("<Q", data, offset)
        offset += 12 + length + 4
        ends.append(offset)
    return ends
