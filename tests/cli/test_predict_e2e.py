"""`tpu-pipeline predict` on the pipeline's own pushed digits model, through the real CLI."""

from __future__ import annotations

import csv
import json

import pytest
import tensorflow as tf
from tensorflow_serving.apis import prediction_log_pb2

from tpu_pipeline.cli.main import main
from tpu_pipeline.common.owned_paths import MARKER, write_owned
from tpu_pipeline.components.explain.store import read_attributions

pytestmark = pytest.mark.slow

DIGITS_RECORDS = 1797


@pytest.fixture(scope="module")
def pushed(digits_run):
    """The digits run's folder, its data folder, and the digits' examples without labels."""
    config, summary = digits_run
    assert summary.pushed_model
    return config.run_dir, config.run_dir / "data" / "digits"


def _predict(capfd, model, data_dir, output, *extra):
    code = main(
        [
            "predict",
            "--model",
            str(model),
            "--data-dir",
            str(data_dir),
            "--output",
            str(output),
            *extra,
        ]
    )
    out, err = capfd.readouterr()
    return code, out, err


def test_every_record_gets_a_row_in_each_format_and_the_labels_agree(pushed, tmp_path, capfd):
    run_dir, data_dir = pushed
    code, out, _ = _predict(capfd, run_dir, data_dir, tmp_path / "p.csv", "--top-k", "2")
    assert code == 0, out
    rows = list(csv.DictReader((tmp_path / "p.csv").open()))
    assert len(rows) == DIGITS_RECORDS
    assert {int(row["class"]) for row in rows} <= set(range(10))
    assert all(row["class_name"] == row["class"] == row["top1_class"] for row in rows)
    assert "top3_class" not in rows[0]
    # File and record index, in the file's order (the in-process runner keeps it).
    indices = [int(row["source"].rsplit(":", 1)[1]) for row in rows]
    assert indices == list(range(DIGITS_RECORDS))
    accuracy = sum(row["class"] == row["label"] for row in rows) / len(rows)
    assert accuracy > 0.9
    assert f"wrote {DIGITS_RECORDS:,} predictions" in out and "accuracy" in out

    # Beam arguments after `--` reach the pipeline (here the DirectRunner's).
    code, *_ = _predict(
        capfd, run_dir, data_dir, tmp_path / "p.tfrecord", "--", "--direct_num_workers=1"
    )
    assert code == 0
    logs = [
        prediction_log_pb2.PredictionLog.FromString(record.numpy())
        for record in tf.data.TFRecordDataset(str(tmp_path / "p.tfrecord"))
    ]
    assert len(logs) == DIGITS_RECORDS
    by_source = {row["source"]: row for row in rows}
    for log in logs[:50]:
        outputs = log.predict_log.response.outputs
        source = tf.make_ndarray(outputs["source"])[0].decode()
        probabilities = tf.make_ndarray(outputs["probabilities"])[0]
        assert str(probabilities.argmax()) == by_source[source]["class"]


def test_records_without_labels_are_predicted_and_have_no_label(pushed, tmp_path, capfd):
    run_dir, data_dir = pushed
    unlabelled = tmp_path / "incoming"
    unlabelled.mkdir()
    with tf.io.TFRecordWriter(str(unlabelled / "new.tfrecord")) as writer:
        for record in tf.data.TFRecordDataset(str(data_dir / "digits.tfrecord")).take(100):
            example = tf.train.Example.FromString(record.numpy())
            del example.features.feature["label"]
            writer.write(example.SerializeToString())
    code, out, _ = _predict(capfd, run_dir / "serving_model", unlabelled, tmp_path / "p.jsonl")
    assert code == 0, out
    rows = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert len(rows) == 100
    assert all("label" not in row and len(row["top_k"]) == 3 for row in rows)
    assert all(row["top_k"][0]["probability"] >= row["top_k"][1]["probability"] for row in rows)
    assert "accuracy" not in out


def test_a_bad_file_is_named_in_one_line_exit_3_and_the_old_output_is_kept(pushed, tmp_path, capfd):
    run_dir, data_dir = pushed
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "cut.tfrecord").write_bytes((data_dir / "digits.tfrecord").read_bytes()[:5000])
    output = tmp_path / "p.csv"
    write_owned(output, "yesterday's predictions\n", "--output")  # an earlier job's
    code, _, err = _predict(capfd, run_dir, bad, output)
    assert code == 3
    message = [line for line in err.splitlines() if line.startswith("tpu-pipeline:")]
    assert len(message) == 1 and f"{bad / 'cut.tfrecord'}: record 16" in message[0]
    assert output.read_text() == "yesterday's predictions\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == [MARKER, "bad", "p.csv"]

    code, _, err = _predict(capfd, run_dir, tmp_path / "nowhere", output)
    assert code == 3 and "no such folder" in err
    code, _, err = _predict(capfd, run_dir, data_dir, output, "--set", "dataset.num_classes=12")
    assert code == 2 and "scores 10 classes but dataset 'digits' has 12" in err


def test_explain_draws_the_least_confident_answers_of_the_job(pushed, tmp_path, capfd):
    """`--explain N`: the N rows of the output with the lowest probability, each mapped on
    the model that predicted them, into a folder beside the output; a rerun replaces it."""
    run_dir, data_dir = pushed
    summary_path = tmp_path / "s.json"
    output = tmp_path / "p.csv"
    code, out, err = _predict(
        capfd, run_dir, data_dir, output, "--explain", "5", "--summary-json", str(summary_path)
    )
    assert code == 0, out + err
    rows = list(csv.DictReader(output.open()))
    surest_last = sorted(rows, key=lambda row: float(row["probability"]))[:5]
    folder = tmp_path / "p-explained"
    explained = read_attributions(str(folder))
    assert [c.source for c in explained.chosen] == [row["source"] for row in surest_last]
    for answer, row in zip(explained.chosen, surest_last, strict=True):
        assert answer.predicted == int(row["class"]) and answer.label == int(row["label"])
        assert answer.probability == pytest.approx(float(row["probability"]), abs=1e-5)
    assert explained.method == "integrated_gradients" and explained.maps.shape == (5, 8, 8)
    assert (folder / "attributions.png").read_bytes().startswith(b"\x89PNG")
    (line,) = [line for line in err.splitlines() if line.startswith("explained:")]
    assert line.startswith("explained: the 5 least confident answers (integrated gradients, ")
    assert line.endswith(f"{folder}/attributions.png")
    recorded = json.loads(summary_path.read_text())["explained"]
    assert recorded["folder"] == str(folder)
    assert [a["source"] for a in recorded["answers"]] == [c.source for c in explained.chosen]

    # A rerun replaces what the last one wrote, and keeps what the user put beside it.
    (folder / "notes.txt").write_text("the user's notes")
    code, *_ = _predict(capfd, run_dir, data_dir, output, "--explain", "2")
    assert code == 0
    assert len(read_attributions(str(folder)).chosen) == 2
    assert (folder / "notes.txt").read_text() == "the user's notes"
    assert sorted(p.name for p in tmp_path.iterdir()) == [MARKER, "p-explained", "p.csv", "s.json"]
