"""The Trainer keeps each eval example's outcome, named by its image and label, for `runs diff`."""

from __future__ import annotations

import json

import numpy as np
import tensorflow as tf

from tests.components.serving.served_models import DIGITS, write_eval_split
from tpu_pipeline.components.serving.eval_outcomes import (
    EVAL_OUTCOMES_FILE,
    example_key,
    read_eval_outcomes,
    record_eval_outcomes,
)


def says_zero_unless_bright(pixels: tf.Tensor) -> tf.Tensor:
    """A stand-in model: class 1 when the image's mean pixel is above 4.5, else class 0."""
    mean = tf.reduce_mean(tf.reshape(pixels, [tf.shape(pixels)[0], -1]), axis=1)
    return tf.one_hot(tf.cast(mean > 4.5, tf.int32), DIGITS.num_classes)


def test_each_example_is_recorded_with_its_label_and_the_models_answer(tmp_path):
    eval_files = write_eval_split(tmp_path / "eval", count=40)
    run_dir = tmp_path / "model_run"
    run_dir.mkdir()

    written = record_eval_outcomes(
        str(run_dir), says_zero_unless_bright, eval_files, DIGITS, limit=30
    )

    from sklearn.datasets import load_digits

    digits = load_digits()
    expected = (digits.data[:30].mean(axis=1) > 4.5).astype(int)
    assert written.examples == 30  # the limit, not the 40 in the split
    assert written.labels == digits.target[:30].tolist()
    assert written.predicted == expected.tolist()
    assert read_eval_outcomes(str(run_dir)) == written
    right = written.right()
    assert sum(right.values()) == int(np.sum(expected == digits.target[:30]))
    assert json.loads((run_dir / EVAL_OUTCOMES_FILE).read_text())["keys"] == written.keys


def test_an_example_has_the_same_name_in_another_split_and_differs_from_every_other(tmp_path):
    first = record_eval_outcomes(
        str(tmp_path), says_zero_unless_bright, write_eval_split(tmp_path / "a", 30), DIGITS, 30
    )
    again = record_eval_outcomes(
        str(tmp_path), says_zero_unless_bright, write_eval_split(tmp_path / "b", 20), DIGITS, 20
    )
    assert again.keys == first.keys[:20]  # ExampleGen wrote them again: same names
    assert len(set(first.keys)) == 30
    # The label is part of the name: the same image relabelled is another example.
    image = b"\x0a\x02\x08\x01"
    assert example_key(image, 3) != example_key(image, 4)


def test_a_run_without_the_file_has_no_outcomes(tmp_path):
    assert read_eval_outcomes(str(tmp_path)) is None
    (tmp_path / EVAL_OUTCOMES_FILE).write_text("{not json")
    assert read_eval_outcomes(str(tmp_path)) is None
