"""The Trainer's input: static, whole batches of transformed images, from real artifacts."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft

from components.input_pipeline import global_batch_size, make_dataset
from tests.pipeline.e2e_helpers import split_files


@pytest.mark.parametrize("per_replica, replicas, expected", [(64, 1, 64), (64, 8, 512), (1, 2, 2)])
def test_global_batch_is_per_replica_batch_times_replicas(per_replica, replicas, expected):
    assert global_batch_size(per_replica, replicas) == expected


@pytest.mark.parametrize("per_replica, replicas", [(0, 1), (8, 0)])
def test_non_positive_batch_or_replicas_is_refused(per_replica, replicas):
    with pytest.raises(ValueError, match="must be positive"):
        global_batch_size(per_replica, replicas)


@pytest.fixture(scope="module")
def digits_artifacts(digits_run):
    config, _ = digits_run
    transform_dir = sorted((config.pipeline_root / "Transform" / "transform_graph").iterdir())[-1]
    return config, tft.TFTransformOutput(str(transform_dir))


@pytest.mark.slow
def test_eval_batches_are_whole_static_and_scaled(digits_artifacts):
    config, transform_output = digits_artifacts
    files = split_files(config, "eval")
    dataset = make_dataset(files, transform_output, config.dataset, 64, training=False)
    assert dataset.element_spec[0].shape == (64, 8, 8, 1)  # static: XLA compiles once
    assert dataset.element_spec[1].shape == (64,)
    batches = list(dataset)
    examples = sum(1 for _ in tf.data.TFRecordDataset(files, compression_type="GZIP"))
    assert len(batches) == examples // 64  # drop_remainder: the partial batch is dropped
    images = np.concatenate([images for images, _ in batches])
    assert images.dtype == np.float32 and images.min() >= 0.0 and images.max() <= 1.0


@pytest.mark.slow
def test_training_data_repeats_and_reshuffles(digits_artifacts):
    config, transform_output = digits_artifacts
    files = split_files(config, "train")
    dataset = make_dataset(files, transform_output, config.dataset, 32, training=True, seed=1)
    examples = sum(1 for _ in tf.data.TFRecordDataset(files, compression_type="GZIP"))
    labels = [labels.numpy() for _, labels in dataset.take(2 * examples // 32 + 2)]
    assert len(labels) == 2 * examples // 32 + 2  # more batches than one pass holds
    assert not np.array_equal(labels[0], labels[examples // 32 + 1])
