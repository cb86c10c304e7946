"""The `tpu-pipeline` command as a user runs it: exit codes, quiet output, summary JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf
from sklearn.datasets import load_digits

from pipeline.data_sources import write_digits_tfrecord
from tests.components.example_gen.conftest import record_ends

pytestmark = pytest.mark.slow


def run_cli(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "TF_USE_LEGACY_KERAS": "0"},  # the CLI must force Keras 2 itself
    )


def write_bad_digits(path) -> None:
    """Real digits of which some images drifted to a 0-256 pixel scale (outside the schema's
    0-16): each record is well formed, so only the statistics show it. (A label outside
    the classes is refused earlier, by ExampleGen, naming the record.)"""
    digits = load_digits()
    with tf.io.TFRecordWriter(str(path)) as writer:
        for index, (pixels, label) in enumerate(zip(digits.data, digits.target, strict=True)):
            scale = 16 if index % 10 == 5 else 1
            features = {
                "pixels": tf.train.Feature(float_list=tf.train.FloatList(value=pixels * scale)),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
            }
            writer.write(
                tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()
            )


def test_data_breaking_the_schema_stops_before_training_and_pushes_nothing(tmp_path):
    data_dir = tmp_path / "bad"
    data_dir.mkdir()
    write_bad_digits(data_dir / "digits.tfrecord")
    summary_path = tmp_path / "summary.json"
    result = run_cli(
        "run",
        "--data-dir",
        str(data_dir),
        "--output-dir",
        str(tmp_path / "out"),
        "--summary-json",
        str(summary_path),
    )
    assert result.returncode == 3, result.stdout + result.stderr
    summary = json.loads(summary_path.read_text())
    assert "pixels: Out-of-range values" in summary["error"]
    statuses = {c["id"]: c["status"] for c in summary["components"]}
    assert statuses["DataGate"] == "failed"
    assert statuses["Trainer"] == "skipped" and statuses["Pusher"] == "skipped"
    assert summary["blessed"] is False and summary["pushed_model"] is None
    assert not (tmp_path / "out" / "tpu-pipeline-digits" / "serving_model").exists()
    # Quiet mode: progress lines, not the libraries' logs, reach the terminal, on stderr;
    # stdout holds only the results a script reads.
    assert len(result.stderr.splitlines()) < 20
    assert "[ 1/10] ExampleGen" in result.stderr
    assert "DATA REJECTED: nothing was trained or pushed" in result.stderr
    assert [line.split(":")[0] for line in result.stdout.splitlines()] == [
        "report",
        "pushed",
        "logs",
    ]


def test_a_truncated_input_file_stops_the_run_as_a_data_rejection(tmp_path):
    # Cut inside a record header: TensorFlow's reader would take it for a shorter, valid file.
    data_dir = tmp_path / "cut"
    write_digits_tfrecord(data_dir / "digits.tfrecord")
    data = (data_dir / "digits.tfrecord").read_bytes()
    cut = record_ends(data)[899]
    (data_dir / "digits.tfrecord").write_bytes(data[: cut + 3])
    summary_path = tmp_path / "summary.json"

    result = run_cli(
        "run",
        "--data-dir",
        str(data_dir),
        "--output-dir",
        str(tmp_path / "out"),
        "--summary-json",
        str(summary_path),
    )

    assert result.returncode == 3, result.stdout + result.stderr
    message = f"{data_dir / 'digits.tfrecord'}: byte {cut}: the file ends inside the header"
    assert message in result.stderr
    summary = json.loads(summary_path.read_text())
    assert summary["data_rejected"] is True and message in summary["error"]
    statuses = {c["id"]: c["status"] for c in summary["components"]}
    assert statuses["ExampleGen"] == "failed" and statuses["Trainer"] == "skipped"
    assert not (tmp_path / "out" / "tpu-pipeline-digits" / "serving_model").exists()


def test_bad_configuration_exits_2_naming_the_field(tmp_path):
    result = run_cli("run", "--output-dir", str(tmp_path), "--set", "trainer.epochs=0", timeout=120)
    assert result.returncode == 2
    assert "trainer.epochs" in result.stderr
