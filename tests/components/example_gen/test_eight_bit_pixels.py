"""8-bit pixel sources (IDX, CIFAR-10 binary) keep their pixels as bytes: about the source size."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
import tensorflow as tf

from tests.components.example_gen.conftest import make_dataset, run_executor
from tpu_pipeline.cli.synthetic_data import write_synthetic
from tpu_pipeline.components.example_gen.errors import DataFormatError
from tpu_pipeline.components.example_gen.examples import ExampleBuilder


def _source_bytes(folder) -> int:
    """The source's bytes uncompressed (the synthetic IDX files are gzipped)."""
    return sum(
        len(gzip.decompress(path.read_bytes())) if path.suffix == ".gz" else path.stat().st_size
        for path in folder.iterdir()
    )


def _gzipped_tfrecord_bytes(examples: list[tf.train.Example], folder) -> int:
    """What ExampleGen's gzipped TFRecords of these examples take."""
    path = str(folder / "floats.gz")
    with tf.io.TFRecordWriter(path, tf.io.TFRecordOptions(compression_type="GZIP")) as writer:
        for example in examples:
            writer.write(example.SerializeToString())
    return tf.io.gfile.stat(path).length


@pytest.mark.parametrize("data_format, shape", [("idx", "mnist"), ("cifar10_binary", "cifar10")])
def test_8bit_sources_take_about_their_own_bytes_a_quarter_of_the_float_examples(
    tmp_path, output_dir, data_format, shape
):
    raw = write_synthetic(tmp_path / "raw", data_format, 300, shape, 50, seed=1)
    dataset = make_dataset(data_format, shape)

    splits = run_executor(dataset, raw, output_dir)

    stored = sum(path.stat().st_size for path in output_dir.rglob("*.gz"))
    source = _source_bytes(raw)
    assert stored <= 1.1 * source
    # The same examples as the float list ExampleGen wrote before.
    floats = ExampleBuilder(make_dataset("npz", shape))
    as_floats = []
    for example in splits["train"] + splits["eval"]:
        feature = example.features.feature
        pixels = np.frombuffer(feature["pixels"].bytes_list.value[0], np.uint8)
        as_floats.append(floats.build(pixels, feature["label"].int64_list.value[0], "test"))
    float_bytes = _gzipped_tfrecord_bytes(as_floats, tmp_path)
    assert float_bytes > 1.3 * stored


def test_an_8bit_format_refuses_pixels_that_are_not_unsigned_bytes():
    builder = ExampleBuilder(make_dataset("idx"))

    with pytest.raises(DataFormatError) as raised:
        builder.build(np.zeros(784, np.float32), 1, "train-images: image 3")

    assert str(raised.value) == (
        "train-images: image 3: pixels are float32, but format idx stores whole 0-255 values "
        "as bytes; expected unsigned bytes (uint8)"
    )
