"""A new span whose label mix drifted from the previous span's stops the run before training."""

from __future__ import annotations

import io

import pytest
import tensorflow as tf

from tests.conftest import small_digits_config
from tpu_pipeline.pipeline.local.runner import run_local
from tpu_pipeline.pipeline.wiring.data_sources import write_digits_tfrecord


def write_more_ones(source, path) -> None:
    """The same digits with every 1 three times: valid values, but a 1 in four labels
    instead of one in ten (L-infinity distance ~0.15 from the original mix)."""
    path.parent.mkdir(parents=True)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in tf.data.TFRecordDataset(str(source)):
            example = tf.train.Example.FromString(record.numpy())
            copies = 3 if example.features.feature["label"].int64_list.value[0] == 1 else 1
            for _ in range(copies):
                writer.write(record.numpy())


@pytest.mark.slow
def test_a_span_with_a_shifted_label_mix_is_rejected_and_stays_rejected(tmp_path):
    data_dir = tmp_path / "data"
    write_digits_tfrecord(data_dir / "span-1" / "digits.tfrecord")
    config = small_digits_config(
        tmp_path / "out",
        **{
            "dataset.data_dir": str(data_dir),
            "dataset.file_pattern": "span-{SPAN}/*.tfrecord",
            "trainer.train_steps": 20,
            "trainer.epochs": 1,
            "serving.tflite_variants": [],  # about the label mix; digits_run checks them
        },
    )
    assert config.dataset.label_drift_threshold == 0.1  # on by default
    first = run_local(config, io.StringIO())
    assert first.succeeded, first.error  # the first span has nothing to drift from

    write_more_ones(data_dir / "span-1" / "digits.tfrecord", data_dir / "span-2" / "d.tfrecord")
    second = run_local(config, io.StringIO())

    assert second.data_rejected and not second.succeeded
    assert "train: label: label mix drifted from the previous span" in second.error
    assert "The feature value with maximum difference is: 1" in second.error
    statuses = {c.id: c.status for c in second.components}
    assert statuses["DataGate"] == "failed"
    assert statuses["Trainer"] == "skipped" and statuses["Pusher"] == "skipped"

    # Run again on the same span: still compared with span 1, still rejected.
    third = run_local(config, io.StringIO())
    assert third.data_rejected and "label mix drifted" in third.error
