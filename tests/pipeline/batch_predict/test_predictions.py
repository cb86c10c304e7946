"""Each output format holds the same readable fields, and parses with its own reader."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import prediction_log_pb2

from tpu_pipeline.pipeline.batch_predict.predictions import Predictions, RowFormat, top_k

NAMES = ("cat", "dog", "owl", "yak")
ROWS = RowFormat(NAMES, k=3, model_version=42)
SCORES = np.array([0.1, 0.6, 0.1, 0.2], np.float32)


def _predictions(*labels):
    """One record per label, all with SCORES; sources name the record's index."""
    return Predictions(
        [f"gs://b/x.tfrecord:{index}" for index in range(len(labels))],
        [b"serialized"] * len(labels),
        np.stack([SCORES] * len(labels)),
        list(labels),
    )


def test_top_k_is_most_probable_first_ties_by_index_and_at_most_the_classes():
    assert top_k(SCORES, 3).tolist() == [1, 3, 0]
    assert top_k(SCORES, 10).tolist() == [1, 3, 0, 2]
    assert top_k(np.array([[0.5, 0.5], [0.2, 0.8]], np.float32), 1).tolist() == [[0], [1]]


def test_a_row_names_the_class_and_its_top_k_and_the_label_only_when_there_is_one():
    row, unlabelled = ROWS.rows(_predictions(3, None))
    assert (row["source"], row["class"], row["class_name"]) == ("gs://b/x.tfrecord:0", 1, "dog")
    assert row["probability"] == 0.6
    assert [(r["class"], r["class_name"]) for r in row["top_k"]] == [
        (1, "dog"),
        (3, "yak"),
        (0, "cat"),
    ]
    assert row["label"] == 3
    assert unlabelled["source"] == "gs://b/x.tfrecord:1" and "label" not in unlabelled


def test_csv_lines_parse_under_their_header_with_an_empty_label_when_there_is_none():
    text = "\n".join([ROWS.csv_header(), ROWS.csv_lines(_predictions(2, None))])
    labelled, unlabelled = csv.DictReader(text.splitlines())
    assert labelled["source"] == "gs://b/x.tfrecord:0" and labelled["class_name"] == "dog"
    assert (labelled["label"], unlabelled["label"]) == ("2", "")
    assert (labelled["top2_class"], labelled["top2_class_name"], labelled["top3_probability"]) == (
        "3",
        "yak",
        "0.1",
    )
    assert "top4_class" not in labelled


def _awkward():
    """Names and sources a template could get wrong: a comma, quotes, a line break, unicode."""
    rows = RowFormat(('say "hi"', "a, b", "line\nbreak", "café"), k=3)
    rng = np.random.default_rng(0)
    batch = Predictions(
        ["gs://b/x.tfrecord:0", 'dir,with "quotes"/ü.png:0', "plain:7"],
        [b""] * 3,
        rng.dirichlet(np.ones(4), 3).astype(np.float32),
        [2, None, 0],
    )
    return rows, batch


def test_json_lines_are_the_rows_as_json_dumps_writes_them():
    rows, batch = _awkward()
    assert rows.json_lines(batch).split("\n") == [json.dumps(row) for row in rows.rows(batch)]
    batch.probabilities[1, 0] = np.nan  # a broken model's output still reads back as JSON
    assert [json.loads(line)["source"] for line in rows.json_lines(batch).split("\n")] == (
        batch.sources
    )


def test_csv_lines_are_the_rows_as_the_csv_module_writes_them():
    rows, batch = _awkward()
    expected = io.StringIO()
    writer = csv.writer(expected, lineterminator="\n")
    for row in rows.rows(batch):
        top = [(r["class"], r["class_name"], r["probability"]) for r in row["top_k"]]
        writer.writerow([row["source"], *top[0], row.get("label", ""), *sum(top, ())])
    assert rows.csv_lines(batch) + "\n" == expected.getvalue()


def test_a_class_name_with_a_comma_or_quote_stays_one_csv_field():
    rows = RowFormat(('say "hi"', "a, b"), k=2)
    batch = Predictions(["f:0"], [b""], np.array([[0.3, 0.7]], np.float32), [None])
    (row,) = csv.DictReader([rows.csv_header(), rows.csv_lines(batch)])
    assert (row["class_name"], row["top2_class_name"]) == ("a, b", 'say "hi"')


def test_a_prediction_log_is_the_predict_call_for_the_record_with_the_readable_outputs():
    labelled, unlabelled = (
        prediction_log_pb2.PredictionLog.FromString(log)
        for log in ROWS.prediction_logs(_predictions(3, None))
    )
    log = labelled
    request, response = log.predict_log.request, log.predict_log.response
    assert request.model_spec.signature_name == "serving_default"
    assert request.model_spec.version.value == 42
    assert tf.make_ndarray(request.inputs["examples"]).tolist() == [b"serialized"]
    outputs = {name: tf.make_ndarray(tensor) for name, tensor in response.outputs.items()}
    np.testing.assert_array_equal(outputs["probabilities"], SCORES[None])
    assert outputs["top_k_classes"].tolist() == [[1, 3, 0]]
    assert outputs["top_k_class_names"].tolist() == [[b"dog", b"yak", b"cat"]]
    assert outputs["source"].tolist() == [b"gs://b/x.tfrecord:0"]
    assert outputs["label"].tolist() == [3]
    assert "label" not in unlabelled.predict_log.response.outputs
