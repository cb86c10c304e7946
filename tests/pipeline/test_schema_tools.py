"""Bootstrapping a schema from data with TFDV, for a person to curate."""

import gzip
import io
import os
import pty
import re
import subprocess
import sys

import pytest
import tensorflow_data_validation as tfdv
from tensorflow_metadata.proto.v0 import schema_pb2

from tpu_pipeline import schemas
from tpu_pipeline.cli.main import EXIT_BAD_CONFIG, EXIT_DATA_REJECTED, main
from tpu_pipeline.cli.synthetic_data import synthetic_dataset
from tpu_pipeline.common.config import ConfigError, DatasetConfig
from tpu_pipeline.pipeline.data_tools.schema_tools import (
    SchemaExistsError,
    check_pixel_feature_type,
    check_provenance_features,
    describe_schema,
    infer_schema,
    schema_to_bootstrap,
    write_schema,
)
from tpu_pipeline.pipeline.local import progress
from tpu_pipeline.pipeline.local.progress import LiveStatus


@pytest.fixture(scope="module")
def inferred(mnist_tfrecord):
    """The schema of the shipped MNIST examples, and the progress lines inferring it showed."""
    shown = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(progress, "PLAIN_UPDATE_SECONDS", 0.0)  # every update, as a line
        schema = infer_schema(str(mnist_tfrecord), LiveStatus(shown))
    return schema, shown.getvalue().splitlines()


@pytest.fixture(scope="module")
def mnist_schema(inferred):
    return inferred[0]


def test_inferring_shows_the_files_and_records_read_then_tfdvs_pass(inferred, mnist_tfrecord):
    _, lines = inferred
    assert lines[0] == f"reading {mnist_tfrecord}"
    assert lines[1].startswith("reading file 1/1: 0 records read (")
    assert lines[2].startswith("read 1,000 records in 1 file(s) (")
    assert lines[3] == "computing statistics of 1,000 records with TFDV"
    assert lines[-1].startswith("computed statistics with TFDV (")


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
    assert main([*command, "--output", str(output)]) == EXIT_BAD_CONFIG  # not without --force


@pytest.mark.slow
def test_schema_infer_shows_progress_and_no_library_warnings(mnist_tfrecord, tmp_path):
    output = tmp_path / "schema.pbtxt"
    temp_dir = tmp_path / "tmp"
    temp_dir.mkdir()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tpu_pipeline.cli.main",
            "schema",
            "infer",
            "--data",
            str(mnist_tfrecord),
        ]
        + ["--name", "letters", "--output", str(output)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "TMPDIR": str(temp_dir)},
    )
    assert result.returncode == 0, result.stderr
    shown = result.stdout + result.stderr
    # The libraries' lines went to a log of the command's own, and that is all the command
    # left in the temporary folder (TFDV's statistics file went with its folder).
    (log,) = temp_dir.iterdir()
    assert re.fullmatch(r"tpu-pipeline-schema-infer-\d{8}-\d{6}-\w+\.log", log.name)
    assert log.stat().st_size > 0
    # Off a terminal: plain lines on stderr, over files and records, then TFDV's pass.
    progress = result.stderr.splitlines()
    assert progress[0] == f"reading {mnist_tfrecord}"
    assert re.fullmatch(r"read 1,000 records in 1 file\(s\) \(\d+\.\d s\)", progress[1])
    assert progress[2] == "computing statistics of 1,000 records with TFDV"
    assert re.fullmatch(r"computed statistics with TFDV \(\d+\.\d s\)", progress[3])
    assert "\r" not in result.stderr
    assert result.stdout.splitlines() == [
        f"wrote {output}: review value ranges, shapes and the label domain before relying on it"
    ]
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


@pytest.mark.slow
def test_schema_infer_on_a_terminal_keeps_one_live_line(mnist_tfrecord, tmp_path):
    output = tmp_path / "schema.pbtxt"
    leader, follower = pty.openpty()
    command = ["schema", "infer", "--data", str(mnist_tfrecord), "--name", "letters"]
    process = subprocess.Popen(
        [sys.executable, "-m", "tpu_pipeline.cli.main", *command, "--output", str(output)],
        stdout=subprocess.PIPE,
        stderr=follower,
    )
    os.close(follower)
    shown = b""
    while chunk := _read_terminal(leader):
        shown += chunk
    os.close(leader)
    assert process.wait(timeout=60) == 0
    assert process.stdout.read().decode().startswith(f"wrote {output}")
    terminal = shown.decode()
    # rich redraws the status line in place with its clock, then leaves the result lines.
    redraws = [part for part in terminal.split("\r") if "statistics of 1,000 records" in part]
    assert len(redraws) >= 2, terminal
    assert re.search(r"with TFDV +\d+\.\d s", terminal)
    assert "read 1,000 records in 1 file(s)" in terminal


def _read_terminal(fd: int) -> bytes:
    try:
        return os.read(fd, 4096)
    except OSError:  # EIO: the command closed the terminal
        return b""


def test_schema_infer_writes_the_schema_file_the_configuration_names(mnist_tfrecord, tmp_path):
    output = tmp_path / "curated" / "letters.pbtxt"
    config = tmp_path / "letters.yaml"
    config.write_text(
        "dataset:\n  name: letters\n  image_shape: [28, 28, 1]\n  pixel_feature: image_floats\n"
        f"  label_feature: image_class\n  num_classes: 10\n  schema_file: {output}\n"
    )
    assert main(["schema", "infer", "--data", str(mnist_tfrecord), "--config", str(config)]) == 0
    assert tfdv.get_feature(tfdv.load_schema_text(str(output)), "image_class")


@pytest.mark.parametrize(
    "arguments, message",
    [
        ([], "--name NAME, --config FILE"),
        (["--name", "letters", "--set", "dataset=mnist"], "not both"),
        (["--name", "letters", "--output", "{tmp}"], "is a folder; the schema is a file"),
    ],
)
def test_schema_infer_refuses_unclear_targets_before_reading(
    arguments, message, mnist_tfrecord, tmp_path, capsys
):
    arguments = [a.replace("{tmp}", str(tmp_path)) for a in arguments]
    assert main(["schema", "infer", "--data", str(mnist_tfrecord), *arguments]) == EXIT_BAD_CONFIG
    assert message in capsys.readouterr().err


def _dataset(**fields) -> DatasetConfig:
    return DatasetConfig(
        name="letters",
        image_shape=(28, 28, 1),
        pixel_feature="pixels",
        label_feature="label",
        num_classes=26,
        **fields,
    )


def test_a_new_dataset_bootstraps_where_schema_file_says_and_never_over_a_schema(tmp_path):
    target = tmp_path / "new" / "schema.pbtxt"
    assert schema_to_bootstrap(_dataset(schema_file=str(target))) == target
    target.parent.mkdir()
    target.write_text("# curated\n")
    assert schema_to_bootstrap(_dataset(schema_file=str(target))) is None


def test_a_new_dataset_without_schema_file_bootstraps_in_the_checkouts_schemas_folder():
    assert schema_to_bootstrap(_dataset()) == schemas.SCHEMAS_DIR / "letters" / "schema.pbtxt"


def test_an_installed_package_takes_no_new_schema(monkeypatch):
    monkeypatch.setattr(schemas, "in_source_checkout", lambda: False)
    with pytest.raises(ConfigError, match="installed package.*set dataset.schema_file"):
        schema_to_bootstrap(_dataset())


def test_a_schema_file_that_is_a_folder_or_under_a_file_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="is a folder; it names the schema file itself"):
        schema_to_bootstrap(_dataset(schema_file=str(tmp_path)))
    (tmp_path / "notes.txt").write_text("")
    with pytest.raises(ConfigError, match="is not a writable folder"):
        schema_to_bootstrap(_dataset(schema_file=str(tmp_path / "notes.txt" / "schema.pbtxt")))


def test_describe_schema_names_each_features_range_and_shape(mnist_schema):
    assert describe_schema(mnist_schema) == (
        "image_class 0 to 9, shape [1]; image_floats -0.5 to 0.5, shape [784]"
    )


def _schema_with_pixels(path, feature_type) -> None:
    schema = schema_pb2.Schema()
    schema.feature.add(name="pixels", type=feature_type)
    schema.feature.add(name="label", type=schema_pb2.INT)
    write_schema(schema, path)


def test_a_float_schema_of_8bit_pixels_stops_the_run_saying_how_to_bootstrap_it_again(tmp_path):
    path = tmp_path / "schema.pbtxt"
    _schema_with_pixels(path, schema_pb2.FLOAT)
    idx = synthetic_dataset("idx", schema_file=str(path))

    with pytest.raises(ConfigError) as raised:
        check_pixel_feature_type(idx)

    message = str(raised.value)
    assert message.startswith(f"{path}: declares pixel feature 'pixels' as FLOAT, but ")
    assert "stores format idx's 8-bit pixels (whole 0-255 values) as BYTES" in message
    assert f"move {path} away and run" in message and "tpu-pipeline schema infer" in message
    # The same schema suits float pixels; a BYTES one suits 8-bit pixels.
    check_pixel_feature_type(idx.model_copy(update={"format": "npz"}))
    _schema_with_pixels(path.with_name("bytes.pbtxt"), schema_pb2.BYTES)
    check_pixel_feature_type(
        idx.model_copy(update={"schema_file": str(path.with_name("bytes.pbtxt"))})
    )


def _photo_facts(path, sizes):
    """A TFRecord of photo examples as ExampleGen describes them: height, width, format, label."""
    import tensorflow as tf

    def feature(value):
        if isinstance(value, bytes):
            return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))

    with tf.io.TFRecordWriter(str(path)) as writer:
        for index, (height, width) in enumerate(sizes):
            features = dict(
                image=b"\xff\xd8", image_height=height, image_width=width,
                image_format=b"jpeg", label=index % 2,
            )  # fmt: skip
            named = {name: feature(value) for name, value in features.items()}
            writer.write(
                tf.train.Example(features=tf.train.Features(feature=named)).SerializeToString()
            )
    return path


def test_photo_sizes_and_formats_are_bounded_by_what_examplegen_reads_not_by_the_sample(tmp_path):
    from tpu_pipeline.components.example_gen.images import MAX_IMAGE_SIDE

    path = _photo_facts(tmp_path / "photos.tfrecord", [(130, 200), (1984, 1500), (480, 640)])
    schema = infer_schema(str(path))
    for name in ("image_height", "image_width"):
        domain = tfdv.get_feature(schema, name).int_domain
        assert (domain.min, domain.max) == (1, MAX_IMAGE_SIDE) == (1, 65_500)
    assert list(tfdv.get_domain(schema, "image_format").value) == ["jpeg", "png", "gif", "bmp"]
    # A later folder of smaller PNG photos is no anomaly against it.
    import pyarrow as pa
    from tensorflow_data_validation.statistics.stats_impl import generate_statistics_in_memory

    later = pa.RecordBatch.from_pydict(
        {
            "image": [[b"\x89PNG"]] * 2,
            "image_height": [[64], [96]],
            "image_width": [[48], [96]],
            "image_format": [[b"png"]] * 2,
            "label": [[0], [1]],
        }
    )
    anomalies = tfdv.validate_statistics(generate_statistics_in_memory(later), schema)
    assert not anomalies.anomaly_info


def _examples_with_provenance(path, spans_and_folders) -> None:
    """Examples with a span and a source folder each; (None, None) for neither."""
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(path)) as writer:
        for index, (span, folder) in enumerate(spans_and_folders):
            feature = {
                "pixels": tf.train.Feature(float_list=tf.train.FloatList(value=[1.0] * 4)),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[index % 2])),
            }
            if span is not None:
                feature["span"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[span]))
                feature["source_folder"] = tf.train.Feature(
                    bytes_list=tf.train.BytesList(value=[folder.encode()])
                )
            writer.write(
                tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
            )


def test_a_bootstrapped_schema_takes_the_next_span_and_folder_and_runs_without_them(tmp_path):
    """The observed spans (1, 2) and folders would otherwise bound the next run's."""
    first = tmp_path / "first.tfrecord"
    _examples_with_provenance(first, [(1, "scanner-a"), (2, "scanner-b")] * 10)
    schema = infer_schema(str(first))
    later, plain = tmp_path / "later.tfrecord", tmp_path / "plain.tfrecord"
    _examples_with_provenance(later, [(3, "scanner-c")] * 20)
    # Without either feature (a run of one span, no folders) the same schema holds too.
    _examples_with_provenance(plain, [(None, None)] * 20)
    for data in (later, plain):
        statistics = tfdv.generate_statistics_from_tfrecord(
            str(data), output_path=str(tmp_path / f"{data.stem}-stats.tfrecord")
        )
        anomalies = tfdv.validate_statistics(statistics, schema)
        assert not anomalies.anomaly_info, (data, anomalies)


def test_a_schema_without_the_recorded_features_stops_the_run_with_what_to_add(tmp_path):
    path = tmp_path / "schema.pbtxt"
    _schema_with_pixels(path, schema_pb2.FLOAT)
    dataset = synthetic_dataset("npz", schema_file=str(path)).model_copy(
        update={"file_pattern": "span-{SPAN}/*.npz", "span_window": 3}
    )
    with pytest.raises(ConfigError) as raised:
        check_provenance_features(dataset)
    message = str(raised.value)
    assert message.startswith(f"{path}: has no 'span' feature, which ExampleGen adds to every ")
    assert "dataset.span_window 3" in message
    # What the message says to add is a schema feature that makes the check pass.
    added = message.split("add it to the schema: ", 1)[1]
    path.write_text(path.read_text() + added + "\n")
    check_provenance_features(dataset)
    with pytest.raises(ConfigError, match="'source_folder' feature.*source_folder_slices is on"):
        check_provenance_features(dataset.model_copy(update={"source_folder_slices": True}))
    check_provenance_features(dataset.model_copy(update={"span_window": 1}))  # records nothing


def test_force_keeps_the_curated_schema_it_replaces_beside_it(tmp_path):
    path = tmp_path / "schema.pbtxt"
    path.write_text('feature { name: "curated" }\n')

    kept = write_schema(schema_pb2.Schema(feature=[{"name": "inferred"}]), path, overwrite=True)

    assert kept.parent == tmp_path and kept.name.startswith("schema.pbtxt.replaced-")
    assert kept.read_text() == 'feature { name: "curated" }\n'
    assert 'name: "inferred"' in path.read_text()
