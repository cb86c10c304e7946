"""A real rejected run, shared by the report tests that read one."""

from __future__ import annotations

import pytest
import tensorflow as tf

from cli.main import main

PIXELS = 64


def _write_digits_with_a_bad_pixel(path) -> None:
    """Well-formed digits-shaped examples, one with pixels of 99: the curated schema allows 0-16."""
    with tf.io.TFRecordWriter(str(path)) as writer:
        for index in range(50):
            pixel = 99.0 if index == 0 else float(index % 17)
            example = tf.train.Example(
                features=tf.train.Features(
                    feature={
                        "pixels": tf.train.Feature(
                            float_list=tf.train.FloatList(value=[pixel] * PIXELS)
                        ),
                        "label": tf.train.Feature(
                            int64_list=tf.train.Int64List(value=[index % 10])
                        ),
                    }
                )
            )
            writer.write(example.SerializeToString())


@pytest.fixture(scope="package")
def rejected_run(tmp_path_factory):
    """`tpu-pipeline run` on data with out-of-range pixels; returns (exit code, run dir)."""
    data_dir = tmp_path_factory.mktemp("bad-data")
    _write_digits_with_a_bad_pixel(data_dir / "digits.tfrecord")
    output_dir = tmp_path_factory.mktemp("rejected")
    code = main(
        ["run", "--dataset", "digits", "--data-dir", str(data_dir), "--output-dir", str(output_dir)]
    )
    return code, output_dir / "tpu-pipeline-digits"
