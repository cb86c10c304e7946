"""Batch predictions read records without labels; a label that is there is still checked."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from tests.components.example_gen.conftest import make_dataset
from tpu_pipeline.components.example_gen.errors import DataFormatError
from tpu_pipeline.components.example_gen.examples import ExampleBuilder
from tpu_pipeline.components.example_gen.formats import read_csv, read_image_file, read_tfrecord


def _labels(records, dataset):
    return [
        list(example.features.feature[dataset.label_feature].int64_list.value)
        if dataset.label_feature in example.features.feature
        else None
        for _, example in records
    ]


def _tfrecord(path, labels):
    with tf.io.TFRecordWriter(str(path)) as writer:
        for label in labels:
            feature = {"pixels": tf.train.Feature(float_list=tf.train.FloatList(value=[0.5] * 784))}
            if label is not None:
                feature["label"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))
            writer.write(
                tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
            )


def test_tfrecords_without_labels_give_examples_without_the_label_feature(tmp_path):
    dataset = make_dataset("tfrecord")
    _tfrecord(tmp_path / "mixed.tfrecord", [None, 4])
    records = list(read_tfrecord(str(tmp_path / "mixed.tfrecord"), ExampleBuilder(dataset, False)))
    assert _labels(records, dataset) == [None, [4]]
    with pytest.raises(DataFormatError, match="record 0: no label feature 'label'"):
        list(read_tfrecord(str(tmp_path / "mixed.tfrecord"), ExampleBuilder(dataset)))
    _tfrecord(tmp_path / "bad.tfrecord", [None, 12])
    with pytest.raises(DataFormatError, match=r"record 1: label 12 is outside the class range"):
        list(read_tfrecord(str(tmp_path / "bad.tfrecord"), ExampleBuilder(dataset, False)))


def test_a_csv_without_its_label_column_reads_as_unlabelled(tmp_path):
    dataset = make_dataset("csv", "mnist")
    path = tmp_path / "rows.csv"
    header = ",".join(f"p{i}" for i in range(784))
    path.write_text(f"{header}\n{','.join(['1'] * 784)}\n")
    records = list(read_csv(str(path), ExampleBuilder(dataset, labels_required=False)))
    assert _labels(records, dataset) == [None]
    with pytest.raises(DataFormatError, match="no column 'label' in the header"):
        list(read_csv(str(path), ExampleBuilder(dataset)))


def test_an_image_folder_not_named_for_a_class_gives_no_label(tmp_path):
    dataset = make_dataset("image_folder")
    for folder in ("incoming", "7"):
        (tmp_path / folder).mkdir()
        Image.fromarray(np.zeros((28, 28), np.uint8)).save(tmp_path / folder / "a.png")
    builder = ExampleBuilder(dataset, labels_required=False)
    unlabelled = list(read_image_file(str(tmp_path / "incoming" / "a.png"), builder))
    labelled = list(read_image_file(str(tmp_path / "7" / "a.png"), builder))
    assert _labels(unlabelled + labelled, dataset) == [None, [7]]
