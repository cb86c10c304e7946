"""The Trainer's input: static, whole batches of transformed images, from real artifacts."""

import logging

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft
import tf_keras

from tests.pipeline.e2e_helpers import split_files
from tpu_pipeline.common.config import TrainerConfig
from tpu_pipeline.components.device.policy import DEVICE_DEFAULTS
from tpu_pipeline.components.models import build_model, compile_model
from tpu_pipeline.components.training.augmentation import Augmentation
from tpu_pipeline.components.training.input_pipeline import (
    global_batch_size,
    make_dataset,
    make_eval_dataset,
)
from tpu_pipeline.components.training.learning_rate import make_optimizer
from tpu_pipeline.components.training.loop import train


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


def _labels(files, config) -> np.ndarray:
    records = tf.data.TFRecordDataset(files, compression_type="GZIP")
    feature = config.dataset.label_feature
    return np.array(
        [
            tf.train.Example.FromString(r.numpy()).features.feature[feature].int64_list.value[0]
            for r in records
        ]
    )


@pytest.mark.slow
def test_eval_batches_are_static_and_hold_every_example_once(digits_artifacts):
    config, transform_output = digits_artifacts
    files = split_files(config, "eval")
    eval_input = make_eval_dataset(files, transform_output, config.dataset, 64)
    images_spec, labels_spec, weights_spec = eval_input.dataset.element_spec
    assert images_spec.shape == (64, 8, 8, 1)  # static: XLA compiles once
    assert labels_spec.shape == weights_spec.shape == (64,)
    batches = list(eval_input.dataset)
    labels = np.concatenate([labels for _, labels, _ in batches])
    weights = np.concatenate([weights for _, _, weights in batches])
    expected = _labels(files, config)
    assert eval_input.examples == len(expected) and len(expected) % 64  # a partial last batch
    assert len(batches) == -(-len(expected) // 64)  # the partial batch is kept, filled
    np.testing.assert_array_equal(labels[: len(expected)], expected)  # each once, in order
    assert np.all(weights[: len(expected)] > 0) and np.all(weights[len(expected) :] == 0)
    images = np.concatenate([images for images, _, _ in batches])
    assert images.dtype == np.float32 and images.min() >= 0.0 and images.max() <= 1.0


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["fit", "custom"])
def test_an_eval_split_smaller_than_one_batch_validates_on_every_example(
    digits_artifacts, tmp_path, caplog, loop
):
    # 41 eval examples at a global batch of 64: dropping the remainder left nothing to validate.
    config, transform_output = digits_artifacts
    small = tmp_path / "eval.gz"
    with tf.io.TFRecordWriter(str(small), options="GZIP") as writer:
        for record in tf.data.TFRecordDataset(split_files(config, "eval"), "GZIP").take(41):
            writer.write(record.numpy())
    make = dict(transform_output=transform_output, dataset=config.dataset, batch_size=64)
    train_dataset = make_dataset(split_files(config, "train"), **make, seed=0)
    eval_input = make_eval_dataset([str(small)], **make)
    trainer_config = TrainerConfig(train_steps=10, epochs=2, loop=loop)
    model = build_model("mnist_cnn", config.dataset.image_shape, 10)
    optimizer = make_optimizer(trainer_config, 64, steps_per_epoch=5, total_steps=10)
    compile_model(model, optimizer, jit_compile=False, precision="float32")

    with caplog.at_level(logging.INFO, logger="absl"):
        history = train(
            model,
            train_dataset,
            eval_input,
            strategy=tf.distribute.get_strategy(),
            policy=DEVICE_DEFAULTS["cpu"],
            config=trainer_config,
            steps_per_epoch=5,
            batch_size=64,
            log_dir=str(tmp_path / "logs"),
            backup_dir=str(tmp_path / "backup"),
        )

    # The val metrics are those of the 41 examples exactly: the filler weighs nothing.
    images, labels, weights = next(iter(eval_input.dataset))
    real = weights.numpy() > 0
    assert real.sum() == 41
    probabilities = model.predict(images.numpy()[real], verbose=0)
    loss = tf_keras.losses.sparse_categorical_crossentropy(labels.numpy()[real], probabilities)
    accuracy = (probabilities.argmax(axis=1) == labels.numpy()[real]).mean()
    assert history.history["val_loss"][-1] == pytest.approx(float(np.mean(loss)), rel=1e-4)
    assert history.history["val_accuracy"][-1] == pytest.approx(accuracy, abs=1e-6)
    epoch_lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("epoch ")]
    assert len(epoch_lines) == 2
    assert all("val on all 41 eval examples" in line for line in epoch_lines)


@pytest.mark.slow
def test_training_data_repeats_and_reshuffles(digits_artifacts):
    config, transform_output = digits_artifacts
    files = split_files(config, "train")
    dataset = make_dataset(files, transform_output, config.dataset, 32, seed=1)
    examples = sum(1 for _ in tf.data.TFRecordDataset(files, compression_type="GZIP"))
    labels = [labels.numpy() for _, labels in dataset.take(2 * examples // 32 + 2)]
    assert len(labels) == 2 * examples // 32 + 2  # more batches than one pass holds
    assert not np.array_equal(labels[0], labels[examples // 32 + 1])


def _shifted(image: np.ndarray, down: int, right: int) -> np.ndarray:
    height, width = image.shape[:2]
    padded = np.pad(image, [(1, 1), (1, 1), (0, 0)])
    return padded[1 - down : 1 - down + height, 1 - right : 1 - right + width]


@pytest.mark.slow
def test_training_batches_are_augmented_after_the_transform(digits_artifacts):
    config, transform_output = digits_artifacts
    make = dict(
        file_patterns=split_files(config, "train"),
        transform_output=transform_output,
        dataset=config.dataset,
        batch_size=64,
        seed=3,
    )
    plain_images, plain_labels = next(iter(make_dataset(**make)))
    shifted = make_dataset(**make, augmentation=Augmentation(max_shift=(1, 1)))
    images, labels = next(iter(shifted))

    assert images.shape == plain_images.shape  # static, as XLA needs
    np.testing.assert_array_equal(labels, plain_labels)  # same examples, same order
    moves = [
        next(
            (down, right)
            for down in (-1, 0, 1)
            for right in (-1, 0, 1)
            if np.array_equal(image, _shifted(plain, down, right))
        )
        for image, plain in zip(images.numpy(), plain_images.numpy(), strict=True)
    ]
    assert len(set(moves)) > 3  # each image draws its own whole-pixel move


@pytest.mark.slow
def test_pixel_data_flips_by_turns_each_example_mirrored_in_every_other_pass(digits_artifacts):
    config, transform_output = digits_artifacts
    files = split_files(config, "train")
    examples = sum(1 for _ in tf.data.TFRecordDataset(files, compression_type="GZIP"))
    alternating = Augmentation(flip=True, flip_alternates=True)
    stream = make_dataset(
        files, transform_output, config.dataset, 1, seed=2, augmentation=alternating
    )

    images = np.concatenate([batch.numpy() for batch, _ in stream.take(2 * examples)])

    def key(image: np.ndarray) -> tuple[bytes, bool]:
        """The example (its image or its mirror, whichever sorts first) and whether mirrored."""
        mirror = image[:, ::-1]
        return min(image.tobytes(), mirror.tobytes()), image.tobytes() > mirror.tobytes()

    first = dict(
        key(image) for image in images[:examples] if not np.array_equal(image, image[:, ::-1])
    )
    second = dict(key(image) for image in images[examples:])
    assert len(first) > 0.9 * examples
    assert all(second[example] != mirrored for example, mirrored in first.items())
