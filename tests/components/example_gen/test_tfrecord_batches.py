"""Batched TFRecord reading (batch predictions) checks what the record check does, as strictly.

Every bad record is refused with the record check's own message, whichever batch
it falls in; good records go on unchanged, with their labels.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tests.components.example_gen.conftest import make_dataset
from tpu_pipeline.components.example_gen.errors import DataFormatError
from tpu_pipeline.components.example_gen.examples import ExampleBuilder
from tpu_pipeline.components.example_gen.formats import read_tfrecord, read_tfrecord_batches

DATASET = make_dataset("tfrecord")  # 28x28x1, 10 classes
PIXELS = DATASET.pixel_count


def _float_pixels(values) -> tf.train.Feature:
    return tf.train.Feature(float_list=tf.train.FloatList(value=values))


def _int_feature(values) -> tf.train.Feature:
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


GOOD_PIXELS = _float_pixels(np.full(PIXELS, 0.5))


def _example(**features: tf.train.Feature) -> bytes:
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def _record(label=3, pixels=None, **features) -> bytes:
    """A record in the pipeline's layout (label None: none), plus any `features`."""
    feature = {"pixels": GOOD_PIXELS if pixels is None else _float_pixels(pixels)}
    if label is not None:
        feature["label"] = _int_feature([label])
    return _example(**feature, **features)


def _write(path, records: list[bytes]) -> str:
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)
    return str(path)


def _batches(path: str, labels_required=False, size=4):
    builder = ExampleBuilder(DATASET, labels_required)
    return list(read_tfrecord_batches(path, builder, size))


def test_good_records_go_on_unchanged_in_batches_with_their_labels(tmp_path):
    records = [_record(label) for label in (0, 9, None, 4, 5)]
    records[1] = _record(9, extra=_int_feature([1]))  # a feature the model does not read
    batches = _batches(_write(tmp_path / "good.tfrecord", records))
    assert [len(examples) for examples, _ in batches] == [4, 1]
    assert [example for examples, _ in batches for example in examples] == records
    assert [label for _, labels in batches for label in labels] == [0, 9, None, 4, 5]


BAD_RECORDS = {
    "a NaN pixel": _record(pixels=[float("nan")] * PIXELS),
    "too few pixels": _record(pixels=[0.5] * (PIXELS - 1)),
    "a label out of range": _record(label=10),
    "a negative label": _record(label=-1),
    "two labels": _example(pixels=GOOD_PIXELS, label=_int_feature([1, 2])),
    "no label value in an int64 list": _example(pixels=GOOD_PIXELS, label=_int_feature([])),
    "a float label": _example(pixels=GOOD_PIXELS, label=_float_pixels([1.0])),
    "no pixel feature": _example(label=_int_feature([1])),
    "a pixel feature without values": _example(pixels=tf.train.Feature()),
    "bytes that are no Example": b"\x01\x02 not a protocol buffer",
}


@pytest.mark.parametrize("problem", sorted(BAD_RECORDS))
def test_a_bad_record_is_refused_with_the_record_checks_own_message(tmp_path, problem):
    records = [_record() for _ in range(6)]
    records[5] = BAD_RECORDS[problem]  # in the second batch of 4
    path = _write(tmp_path / "bad.tfrecord", records)
    with pytest.raises(DataFormatError) as per_record:
        list(read_tfrecord(path, ExampleBuilder(DATASET, labels_required=False)))
    with pytest.raises(DataFormatError) as batched:
        _batches(path)
    assert str(batched.value) == str(per_record.value)
    assert "record 5" in str(batched.value)


def test_records_the_parse_cannot_take_but_the_record_check_can_go_on_as_it_builds_them(tmp_path):
    int_pixels = _example(pixels=_int_feature([1] * PIXELS), label=_int_feature([2]))
    path = _write(tmp_path / "ints.tfrecord", [_record(1), int_pixels])
    ((examples, labels),) = _batches(path)
    assert labels == [1, 2]
    pixels = tf.train.Example.FromString(examples[1]).features.feature["pixels"]
    assert list(pixels.float_list.value) == [1.0] * PIXELS


def test_a_label_feature_without_a_value_is_no_label_unless_labels_are_required(tmp_path):
    path = _write(
        tmp_path / "empty.tfrecord", [_example(pixels=GOOD_PIXELS, label=tf.train.Feature())]
    )
    assert _batches(path)[0][1] == [None]
    ((_, example),) = read_tfrecord(path, ExampleBuilder(DATASET, labels_required=False))
    assert "label" not in example.features.feature
    with pytest.raises(DataFormatError, match="record 0: label feature 'label' must hold one"):
        _batches(path, labels_required=True)


def test_a_file_without_records_is_refused_by_name(tmp_path):
    path = _write(tmp_path / "none.tfrecord", [])
    with pytest.raises(DataFormatError, match=r"none\.tfrecord: holds no examples"):
        _batches(path)
