"""Per-host input: each input pipeline (host) reads its own share; together, every record once.

The coverage tests run the Trainer's own input (`make_dataset`, as `distributed_training_dataset`
calls it for each host) with a real `tf.distribute.InputContext` per host, on gzipped files of
ExampleGen's layout, and read back which record each training image came from.
"""

from __future__ import annotations

import collections
import itertools
import random
import time

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft

from tpu_pipeline.cli.synthetic_data import synthetic_dataset
from tpu_pipeline.components.training.input_pipeline import (
    host_share,
    make_dataset,
    steps_per_epoch,
)

HOSTS = 4
GLOBAL_BATCH = 8  # 2 examples per host and step: each host holds one replica
# A record's id sits in two pixels, beside a pixel of each end of the byte range, so the
# Transform graph's min-max scaling can be undone from the training image alone.
LOW, HIGH = 10, 200
DATASET = synthetic_dataset("idx")


def example(record_id: int) -> bytes:
    pixels = np.full(28 * 28, LOW, np.uint8)
    pixels[1] = HIGH
    pixels[2], pixels[3] = LOW + divmod(record_id, HIGH - LOW)[0], LOW + record_id % (HIGH - LOW)
    features = {
        "pixels": tf.train.Feature(bytes_list=tf.train.BytesList(value=[pixels.tobytes()])),
        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[record_id % 10])),
    }
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def write_files(folder, counts: list[int]) -> tuple[list[str], int]:
    """ExampleGen-named gzipped files holding `counts[f]` records each; returns them and the
    number of records."""
    paths, next_id = [], 0
    for f, count in enumerate(counts):
        path = str(folder / f"data_tfrecord-{f:05d}-of-{len(counts):05d}.gz")
        with tf.io.TFRecordWriter(path, options="GZIP") as writer:
            for record_id in range(next_id, next_id + count):
                writer.write(example(record_id))
        paths.append(path)
        next_id += count
    return paths, next_id


def record_ids(images: np.ndarray) -> list[int]:
    flat = images.reshape(len(images), -1)
    unit = (flat[:, 2:4] - flat[:, :1]) / (flat[:, 1:2] - flat[:, :1])
    high, low = np.rint(unit * (HIGH - LOW)).astype(int).T
    return list(high * (HIGH - LOW) + low)


def one_epoch(paths: list[str], transform_output, host: int) -> list[int]:
    """The record ids one host trains on in the Trainer's first epoch."""
    context = tf.distribute.InputContext(
        num_input_pipelines=HOSTS, input_pipeline_id=host, num_replicas_in_sync=HOSTS
    )
    batches = make_dataset(
        paths,
        transform_output,
        DATASET,
        context.get_per_replica_batch_size(GLOBAL_BATCH),
        shuffle_buffer=64,
        seed=42,
        shard=(context.num_input_pipelines, context.input_pipeline_id),
    )
    steps = steps_per_epoch(1, None, paths, GLOBAL_BATCH)
    return [i for images, _ in batches.take(steps) for i in record_ids(images.numpy())]


@pytest.fixture
def tpu_host_reading_cloud_storage(monkeypatch):
    """Reads files as a TPU VM host reads Cloud Storage: many files at once, some records late.

    An autotuned interleave opens about one file per CPU: on these 2-CPU machines it read one
    file after the other, and any interleave returned one order on every host. A host with
    many CPUs reads several files in parallel, and with `deterministic=False` a late record
    lets another file's go first, in a different order on each host.
    """
    read, interleave = tf.data.TFRecordDataset, tf.data.Dataset.interleave
    latency = random.Random(0)

    def wait(record):
        if latency.random() < 0.1:
            time.sleep(0.03)
        return record

    def remote_read(*args, **kwargs):
        records = read(*args, **kwargs)
        return records.map(lambda r: tf.ensure_shape(tf.py_function(wait, [r], tf.string), []))

    def many_cpus(self, map_func, cycle_length=None, *args, **kwargs):
        return interleave(self, map_func, cycle_length or 8, *args, **kwargs)

    monkeypatch.setattr(tf.data, "TFRecordDataset", remote_read)
    monkeypatch.setattr(tf.data.Dataset, "interleave", many_cpus)


@pytest.mark.parametrize(
    "counts",
    [[40, 40], [16] * 5, [80]],
    ids=["2-files-4-hosts", "5-files-4-hosts", "1-file-4-hosts"],
)
def test_one_epoch_over_4_hosts_trains_on_every_record_exactly_once(
    tmp_path, eight_bit_transform, tpu_host_reading_cloud_storage, counts
):
    paths, total = write_files(tmp_path, counts)
    transform_output = tft.TFTransformOutput(eight_bit_transform[3])
    epochs = [one_epoch(paths, transform_output, host) for host in range(HOSTS)]
    for first, second in itertools.combinations(epochs, 2):
        assert not set(first) & set(second), "two hosts trained on the same record"
    read = collections.Counter(itertools.chain(*epochs))
    assert sorted(read) == list(range(total)), "a record was skipped"
    assert set(read.values()) == {1}, "a record was read twice"


@pytest.mark.parametrize("hosts", [1, 2, 3, 4])
@pytest.mark.parametrize("files", [10, 2, 1])
def test_per_host_shares_are_disjoint_and_complete(hosts, files):
    paths = [f"gs://bucket/train/data_tfrecord-{i:05d}-of-{files:05d}.gz" for i in range(files)]
    shares = [host_share(list(reversed(paths)), hosts, host) for host in range(hosts)]
    whole = [share.whole for share in shares]
    for first, second in itertools.combinations(whole, 2):
        assert not set(first) & set(second)
    shared = shares[0].shared
    assert all(share.shared == shared for share in shares)  # every host splits the same files
    assert sorted(itertools.chain(shared, *whole)) == sorted(paths)
    assert len(shared) < hosts  # only the remainder is read by every host
    assert len({len(files) for files in whole}) == 1  # every host reads as many whole files


def test_files_a_multiple_of_the_hosts_are_read_whole_by_one_host_each(tmp_path):
    paths = [f"gs://bucket/train/data_tfrecord-{i:05d}-of-00008.gz" for i in range(8)]
    share = host_share(paths, 4, 1)
    assert share.whole == [paths[1], paths[5]] and not share.shared


def test_per_host_input_with_no_files_fails_clearly():
    with pytest.raises(ValueError, match="no training files"):
        host_share([], 4, 0)
