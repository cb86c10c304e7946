"""Order never decides what a batch holds: ExampleGen writes each split shuffled, in shards."""

from __future__ import annotations

import io
import random

import apache_beam as beam
import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from tests.components.example_gen.conftest import make_dataset, run_executor
from tpu_pipeline.common.config import DatasetConfig
from tpu_pipeline.components.example_gen.executor import expected_output_bytes
from tpu_pipeline.components.example_gen.shards import (
    TARGET_SHARD_BYTES,
    WriteShuffledSplit,
    key_range,
    overlapping_shards,
    record_key,
    shard_count,
    shard_name,
    spill_buckets,
)

CLASSES = 10
PER_CLASS = 600  # 6,000 images: the training split (~4,800) outgrows a 4,096-example buffer
WINDOW = 50


def _labels(path) -> list[int]:
    records = tf.data.TFRecordDataset(str(path), compression_type="GZIP")
    return [
        tf.train.Example.FromString(record.numpy()).features.feature["label"].int64_list.value[0]
        for record in records
    ]


@pytest.fixture(scope="module")
def class_sorted_folder(tmp_path_factory):
    """6,000 tiny PNGs in ten class folders: read folder by folder, so sorted by class."""
    root = tmp_path_factory.mktemp("sorted") / "raw"
    rng = np.random.default_rng(0)
    for label in range(CLASSES):
        (root / str(label)).mkdir(parents=True)
        for index in range(PER_CLASS):
            buffer = io.BytesIO()
            Image.fromarray(rng.integers(0, 256, (8, 8), np.uint8)).save(buffer, "PNG")
            (root / str(label) / f"{index:04d}.png").write_bytes(buffer.getvalue())
    return root


def test_a_class_sorted_folder_is_written_shuffled_into_several_shards(
    class_sorted_folder, tmp_path
):
    dataset = DatasetConfig(
        name="sorted",
        image_shape=(8, 8, 1),
        pixel_feature="pixels",
        label_feature="label",
        num_classes=CLASSES,
        format="image_folder",
    )

    splits = run_executor(dataset, class_sorted_folder, tmp_path / "examples")

    shards = sorted((tmp_path / "examples" / "Split-train").iterdir())
    assert len(splits["train"]) > 4096
    assert [path.name for path in shards] == [shard_name(index, 16) for index in range(16)]
    for shard in shards:
        labels = _labels(shard)
        assert len(set(labels[:WINDOW])) >= 8, (shard.name, labels[:WINDOW])
    every_label = sorted(
        e.features.feature["label"].int64_list.value[0] for e in splits["train"] + splits["eval"]
    )
    assert every_label == sorted(list(range(CLASSES)) * PER_CLASS)  # nothing lost or doubled


@pytest.mark.parametrize(
    "records, size, expected",
    [
        (30, 30 * 1000, 1),  # a tiny split: one file
        (300, 300 * 1000, 5),  # a small one: about 64 records a file
        (1440, 1440 * 300, 16),  # the digits' training split: the minimum of 16
        (50_000, 50_000 * 3_000, 16),  # CIFAR-10 as JPEGs, 150 MB
        (1_281_167, 140 * 10**9, 1044),  # ImageNet: ~128 MiB a file
    ],
)
def test_shard_count_follows_the_documented_rule(records, size, expected):
    assert shard_count(records, size) == expected


@pytest.mark.parametrize("buckets, shards", [(16, 16), (16, 5), (16, 1), (32, 16), (16, 1044)])
def test_every_key_reaches_its_shard_through_a_spill_bucket(buckets, shards):
    rng = random.Random(buckets * shards)
    keys = [rng.getrandbits(64) for _ in range(2_000)] + [0, 2**64 - 1]
    for key in keys:
        assert key_range(key, shards) in overlapping_shards(
            key_range(key, buckets), buckets, shards
        )
    # Each bucket is read by its own shards only: about shards / buckets of them, plus a boundary.
    widest = max(len(overlapping_shards(b, buckets, shards)) for b in range(buckets))
    assert widest <= -(-shards // buckets) + 1


def _write_split(records: list[bytes], split_dir, expected_bytes: int) -> list[list[bytes]]:
    with beam.Pipeline() as pipeline:
        _ = (
            pipeline
            | beam.Create(records, reshuffle=False)
            | WriteShuffledSplit(str(split_dir), expected_bytes)
        )
    shards = sorted(split_dir.iterdir())
    return [
        [r.numpy() for r in tf.data.TFRecordDataset(str(s), compression_type="GZIP")]
        for s in shards
    ]


def test_the_spill_estimate_changes_no_file_and_leaves_no_spill(tmp_path):
    """Sizing the spill by a wrong estimate costs reads, never a different output."""
    records = [f"record {index}".encode() * (1 + index % 7) for index in range(700)]
    records += records[:3]  # identical records are kept, each once per copy

    guessed = _write_split(records, tmp_path / "guessed", 0)
    oversized = _write_split(records, tmp_path / "oversized", 200 * TARGET_SHARD_BYTES)
    reordered = _write_split(records[::-1], tmp_path / "reordered", 0)

    assert spill_buckets(0) == 16 and spill_buckets(200 * TARGET_SHARD_BYTES) == 200
    assert len(guessed) == shard_count(len(records), sum(map(len, records))) == 11
    assert guessed == oversized == reordered
    assert sorted(sum(guessed, [])) == sorted(records)
    for shard in guessed:
        assert [record_key(r) for r in shard] == sorted(record_key(r) for r in shard)
    assert not [p for p in (tmp_path / "guessed").iterdir() if p.name.startswith(".")]


def test_the_spill_is_sized_from_tfx_input_fingerprint():
    fingerprint = (
        "split:train,num_files:3,total_bytes:1000,xor_checksum:1,sum_checksum:2\n"
        "split:eval,num_files:1,total_bytes:500,xor_checksum:1,sum_checksum:2"
    )
    photos = make_dataset("image_folder")
    floats = make_dataset("npz")
    eight_bit = make_dataset("idx")
    properties = {"input_fingerprint": fingerprint}

    assert expected_output_bytes(properties, photos) == 1500
    assert expected_output_bytes(properties, eight_bit) == 1500
    assert expected_output_bytes(properties, floats) == 1500 * 8
    assert expected_output_bytes({}, photos) == 0
