"""The `tpu-pipeline` command as a user runs it: exit codes, quiet output, summary JSON."""

from __future__ import annotations

import json

import pytest
import tensorflow as tf

from tests.common.webhook_server import webhook_server
from tests.components.example_gen.conftest import record_ends
from tests.conftest import run_cli
from tpu_pipeline.cli.main import main
from tpu_pipeline.pipeline.wiring.data_sources import write_digits_tfrecord

pytestmark = pytest.mark.slow


def test_data_breaking_the_schema_stops_before_training_and_pushes_nothing(rejected_cli_run):
    result, summary_path, output_dir = rejected_cli_run
    assert result.returncode == 3, result.stdout + result.stderr
    summary = json.loads(summary_path.read_text())
    assert "pixels: Out-of-range values" in summary["error"]
    statuses = {c["id"]: c["status"] for c in summary["components"]}
    assert statuses["DataGate"] == "failed"
    assert statuses["Trainer"] == "skipped" and statuses["Pusher"] == "skipped"
    assert summary["blessed"] is False and summary["pushed_model"] is None
    assert not (output_dir / "tpu-pipeline-digits" / "serving_model").exists()
    # Quiet mode: progress lines, not the libraries' logs, reach the terminal, on stderr;
    # stdout holds only the results a script reads.
    assert len(result.stderr.splitlines()) < 20
    assert "[ 1/12] ExampleGen" in result.stderr
    assert "DATA REJECTED: nothing was trained or pushed" in result.stderr
    assert [line.split(":")[0] for line in result.stdout.splitlines()] == [
        "report",
        "pushed",
        "memory",
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


def test_a_data_folder_that_does_not_exist_is_rejected_in_one_line(tmp_path):
    missing = tmp_path / "nowhere"
    result = run_cli("run", "--data-dir", str(missing), "--output-dir", str(tmp_path / "out"))
    assert result.returncode == 3, result.stdout + result.stderr
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"tpu-pipeline: dataset 'digits': data folder {missing} does not exist "
        "(it would be searched for '*.tfrecord*')"
    ]


def write_digits_in_two_folders(data_dir, eval_count: int) -> None:
    """The real digits as TFRecords: the last `eval_count` in holdout/, the rest in fit/."""
    write_digits_tfrecord(data_dir / "all.tfrecord")
    records = list(tf.data.TFRecordDataset(str(data_dir / "all.tfrecord")).as_numpy_iterator())
    (data_dir / "all.tfrecord").unlink()
    parts = {"fit": records[:-eval_count], "holdout": records[-eval_count:]}
    for folder, part in parts.items():
        (data_dir / folder).mkdir()
        with tf.io.TFRecordWriter(str(data_dir / folder / "digits.tfrecord")) as writer:
            for record in part:
                writer.write(record)


def test_split_patterns_choose_the_eval_files_and_the_run_notifies_and_is_not_repeated(
    tmp_path, capfd
):
    """One real run, three behaviours: split patterns, the webhook's one message, and
    `--if-new-data` running the first time and doing nothing the second."""
    data_dir, eval_count = tmp_path / "data", 250
    write_digits_in_two_folders(data_dir, eval_count)
    summary_path = tmp_path / "summary.json"
    with webhook_server() as (url, webhook):
        # In this process (the CLI's own main): the libraries other tests loaded need no new import.
        code = main(
            run_args := [
                "run",
                "--if-new-data",
                "--data-dir",
                str(data_dir),
                "--output-dir",
                str(tmp_path / "out"),
                "--train-steps",
                "20",
                "--set",
                "dataset.split_patterns.train=fit/*.tfrecord",
                "--set",
                "dataset.split_patterns.eval=holdout/*.tfrecord",
                "--set",
                "trainer.epochs=1",
                "--set",
                "serving.tflite_variants=[]",
                "--set",
                f"notify.webhook={url}",
                "--summary-json",
                str(summary_path),
            ]
        )
        out, err = capfd.readouterr()
        assert code == 0, out + err
        assert err.startswith("tpu-pipeline: no successful run in this run folder yet\n")
        summary = json.loads(summary_path.read_text())
        ((content_type, message),) = webhook.received  # one message, with the outcome
        assert content_type == "application/json"
        title, why, metrics, *rest = message["text"].splitlines()
        outcome = "blessed and pushed" if summary["blessed"] else "not blessed"
        assert title.endswith(f": *{outcome}*") and summary["blessing_reason"] in why
        assert metrics.startswith("metrics: accuracy=") and f"example_count={eval_count}" in metrics
        run_dir = tmp_path / "out" / "tpu-pipeline-digits"
        assert f"report: {run_dir / 'report' / 'report.html'}" in rest
        logs = sorted((run_dir / "logs").iterdir())

        # Nothing new: the same command exits 0 at once, in one line, running nothing.
        assert main(run_args) == 0
        again_out, again_err = capfd.readouterr()
        assert again_out == (
            f"tpu-pipeline: nothing to do: no new data since the last successful run in {run_dir}\n"
        )
        assert again_err == ""
        assert sorted((run_dir / "logs").iterdir()) == logs  # no run started, not even its log
        assert len(webhook.received) == 1
    assert summary["metrics"]["example_count"] == eval_count  # the Evaluator saw holdout/ only
    assert f"val on all {eval_count} eval examples" in err  # and so did the Trainer
    run_dir = tmp_path / "out" / "tpu-pipeline-digits"
    (examples,) = (run_dir / "pipeline_root" / "ExampleGen" / "examples").iterdir()
    counts = {
        split: sum(
            1
            for _ in tf.data.TFRecordDataset(
                [str(p) for p in (examples / f"Split-{split}").iterdir()], compression_type="GZIP"
            )
        )
        for split in ("train", "eval")
    }
    assert counts == {"train": 1797 - eval_count, "eval": eval_count}
