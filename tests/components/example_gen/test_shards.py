"""Order never decides what a batch holds: ExampleGen writes each split shuffled, in shards."""

from __future__ import annotations

import io

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from common.config import DatasetConfig
from components.example_gen.shards import shard_count, shard_name
from tests.components.example_gen.conftest import run_executor

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
