"""Bootstrapping a schema from data with TFDV, for a person to curate."""

import gzip
import subprocess
import sys

import pytest
import tensorflow_data_validation as tfdv
from tensorflow_metadata.proto.v0 import schema_pb2

from cli.main import EXIT_DATA_REJECTED, main
from pipeline.schema_tools import SchemaExistsError, infer_schema, write_schema


@pytest.fixture(scope="module")
def mnist_schema(mnist_tfrecord):
    return infer_schema(str(mnist_tfrecord))


def test_inferred_schema_has_the_pixel_shape_and_observed_range(mnist_schema):
    pixels = tfdv.get_feature(mnist_schema, "image_floats")
    assert pixels.type == schema_pb2.FLOAT
    assert [dim.size for dim in pixels.shape.dim] == [784]
    assert pixels.float_domain.min == pytest.approx(-0.5)
    assert pixels.float_domain.max == pytest.approx(0.5)
    assert pixels.float_domain.disallow_nan and pixels.float_domain.disallow_inf


def test_inferred_label_is_a_categorical_zero_to_nine(mnist_schema):
    label = tfdv.get_feature(mnist_schema, "image_class")
    assert (label.int_domain.min, label.int_domain.max) == (0, 9)
    assert label.int_domain.is_categorical


def test_a_curated_schema_is_not_overwritten_without_force(mnist_schema, tmp_path):
    path = tmp_path / "schema.pbtxt"
    path.write_text("# curated by hand\n")
    with pytest.raises(SchemaExistsError, match="pass --force"):
        write_schema(mnist_schema, path)
    assert path.read_text() == "# curated by hand\n"
    write_schema(mnist_schema, path, overwrite=True)
    assert tfdv.load_schema_text(str(path)) == mnist_schema


def test_schema_infer_command_writes_the_schema_once(mnist_tfrecord, tmp_path):
    output = tmp_path / "letters" / "schema.pbtxt"
    command = ["schema", "infer", "--data", str(mnist_tfrecord), "--name", "letters"]
    assert main([*command, "--output", str(output)]) == 0
    features = {feature.name for feature in tfdv.load_schema_text(str(output)).feature}
    assert features == {"image_floats", "image_class"}
    assert main([*command, "--output", str(output)]) == 1  # no overwrite without --force


@pytest.mark.slow
def test_schema_infer_shows_progress_and_no_library_warnings(mnist_tfrecord, tmp_path):
    output = tmp_path / "schema.pbtxt"
    result = subprocess.run(
        [sys.executable, "-m", "cli.main", "schema", "infer", "--data", str(mnist_tfrecord)]
        + ["--name", "letters", "--output", str(output)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    shown = result.stdout + result.stderr
    assert "computing statistics of" in shown
    assert f"wrote {output}" in result.stdout
    for noise in ("deprecated", "WARNING", "Warning", "cuda"):
        assert noise not in shown, shown


def test_schema_infer_refuses_a_cut_file_as_a_data_rejection(mnist_tfrecord, tmp_path, capsys):
    # Cut right after the 100th record: TFDV's reader alone would infer from 100 examples.
    data = gzip.decompress(mnist_tfrecord.read_bytes())
    cut = tmp_path / "mnist.tfrecord"
    cut.write_bytes(gzip.compress(data[: 100 * len(data) // 1000], mtime=0)[:-8])
    command = ["schema", "infer", "--data", str(cut), "--name", "letters"]

    assert main([*command, "--output", str(tmp_path / "schema.pbtxt")]) == EXIT_DATA_REJECTED

    assert "the gzip stream ends without its end marker" in capsys.readouterr().err
    assert not (tmp_path / "schema.pbtxt").exists()
