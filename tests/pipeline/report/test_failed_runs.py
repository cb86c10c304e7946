"""A run that was rejected or failed still gets a report, and it says why."""

from __future__ import annotations

import pytest
import tensorflow as tf

from cli.main import EXIT_DATA_REJECTED, main
from pipeline.data_sources import DataSourceError
from pipeline.report import write_report
from pipeline.run_summary import RunSummary

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


@pytest.fixture(scope="module")
def rejected_run(tmp_path_factory):
    """`tpu-pipeline run` on data with out-of-range pixels; returns (exit code, run dir)."""
    data_dir = tmp_path_factory.mktemp("bad-data")
    _write_digits_with_a_bad_pixel(data_dir / "digits.tfrecord")
    output_dir = tmp_path_factory.mktemp("rejected")
    code = main(
        ["run", "--dataset", "digits", "--data-dir", str(data_dir), "--output-dir", str(output_dir)]
    )
    return code, output_dir / "tpu-pipeline-digits"


@pytest.mark.slow
def test_a_rejected_run_gets_a_report_naming_the_anomaly(rejected_run):
    code, run_dir = rejected_run
    assert code == EXIT_DATA_REJECTED
    html = (run_dir / "report" / "report.html").read_text(encoding="utf-8")
    assert "Data rejected" in html
    assert "pixels: Out-of-range values" in html
    assert "The Trainer did not run." in html
    assert "Pushed: nothing" in html


@pytest.mark.slow
def test_report_of_a_rejected_run_rebuilt_later_says_why(rejected_run, tmp_path, capsys):
    _, run_dir = rejected_run
    assert main(["report", str(run_dir), "--output", str(tmp_path)]) == 0
    assert str(tmp_path / "report.html") in capsys.readouterr().out
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "Data rejected" in html
    assert "DataGate</td><td>failed" in html
    assert "pixels: Out-of-range values" in html


def test_a_run_that_failed_before_any_component_gets_a_report_with_the_error(tmp_path):
    error = DataSourceError("data folder /nowhere does not exist")
    summary = RunSummary.without_results("tpu-pipeline-digits", [], error, None)
    files = write_report(tmp_path / "run", summary)
    html = files.html.read_text(encoding="utf-8")
    assert (
        "Data rejected, so nothing was trained or pushed: "
        "DataSourceError: data folder /nowhere does not exist" in html
    )
    assert "No component ran." in html
    assert files.figures == {}


def test_report_of_a_folder_without_a_run_says_what_to_pass(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 1
    error = capsys.readouterr().err
    assert "metadata.sqlite is missing" in error
    assert not (tmp_path / "metadata.sqlite").exists()
