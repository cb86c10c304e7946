"""Photos stored encoded: the Transform graph decodes them, training crops them, shapes static."""

import io

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from benchmarks.data import build_transform_graph, photo_dataset
from tpu_pipeline.components.contract import IMAGE_KEY
from tpu_pipeline.components.images.decode import decode_encoded_image, unit_range
from tpu_pipeline.components.training import input_pipeline
from tpu_pipeline.components.training.augmentation import Augmentation
from tpu_pipeline.components.training.input_pipeline import make_dataset, make_eval_dataset

PHOTOS = photo_dataset((24, 24, 3), classes=3)


def _jpeg(rng: np.random.Generator, size: tuple[int, int]) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (*size, 3), np.uint8)).save(buffer, format="JPEG")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def photo_files(tmp_path_factory):
    """40 JPEGs of assorted sizes as ExampleGen stores them, and their transform graph."""
    folder = tmp_path_factory.mktemp("photos")
    rng = np.random.default_rng(0)
    photos = [_jpeg(rng, (30 + 7 * i % 50, 40 + 5 * i % 60)) for i in range(40)]
    with tf.io.TFRecordWriter(str(folder / "data.gz"), options="GZIP") as writer:
        for index, photo in enumerate(photos):
            feature = {
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[photo])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[index % 3])),
            }
            example = tf.train.Example(features=tf.train.Features(feature=feature))
            writer.write(example.SerializeToString())
    pattern = str(folder / "data.gz")
    return pattern, photos, build_transform_graph(pattern, PHOTOS, folder / "transform")


def test_the_transform_graph_decodes_photos_of_any_size_to_the_models_input(photo_files):
    _, photos, transform_output = photo_files

    transformed = transform_output.transform_raw_features(
        {"image": tf.constant([[photos[0]], [photos[1]]])}, drop_unused_features=True
    )

    images = transformed[IMAGE_KEY].numpy()
    assert images.shape == (2, 24, 24, 3)
    expected = unit_range(decode_encoded_image(tf.constant(photos[1]), PHOTOS)).numpy()
    np.testing.assert_allclose(images[1], expected, atol=1e-6)


def test_eval_batches_are_whole_photos_static_and_in_the_unit_range(photo_files):
    pattern, photos, transform_output = photo_files

    eval_input = make_eval_dataset([pattern], transform_output, PHOTOS, 16)

    images, labels, _ = next(iter(eval_input.dataset))
    assert eval_input.examples == 40 and images.shape == (16, 24, 24, 3)
    expected = unit_range(decode_encoded_image(tf.constant(photos[0]), PHOTOS)).numpy()
    np.testing.assert_allclose(images[0].numpy(), expected, atol=1e-6)
    assert labels.numpy().tolist()[:4] == [0, 1, 2, 0]


def test_training_batches_are_random_crops_with_class_weights(photo_files):
    pattern, _, transform_output = photo_files
    augmentation = Augmentation(flip=True, crop_area=(0.25, 1.0))

    batches = make_dataset(
        [pattern],
        transform_output,
        PHOTOS,
        8,
        seed=1,
        augmentation=augmentation,
        class_weights=(1.0, 2.0, 3.0),
    )

    images, labels, weights = next(iter(batches))
    assert images.shape == (8, 24, 24, 3) and images.dtype == tf.float32
    assert 0.0 <= float(tf.reduce_min(images)) and float(tf.reduce_max(images)) <= 1.0
    np.testing.assert_array_equal(weights.numpy(), labels.numpy() + 1.0)


@pytest.mark.parametrize("decoded_cache", [True, False])
def test_whole_photos_train_as_evaluation_sees_them_decoded_once_or_every_pass(
    photo_files, monkeypatch, decoded_cache
):
    pattern, photos, transform_output = photo_files
    if not decoded_cache:  # too large for the decoded cache: the records are cached instead
        monkeypatch.setattr(input_pipeline, "DECODED_CACHE_MAX_BYTES", 1)
    expected = {
        bytes(unit_range(decode_encoded_image(tf.constant(photo), PHOTOS)).numpy()): index % 3
        for index, photo in enumerate(photos)
    }

    batches = make_dataset([pattern], transform_output, PHOTOS, 8, seed=1, shuffle_buffer=40)

    seen = []
    for images, labels in batches.take(10):  # two passes over the 40 photos
        assert images.dtype == tf.float32 and images.shape == (8, 24, 24, 3)
        for image, label in zip(images.numpy(), labels.numpy(), strict=True):
            assert expected[bytes(image)] == label  # exactly a whole photo, with its label
            seen.append(bytes(image))
    assert sorted(seen[:40]) == sorted(seen[40:]) == sorted(expected)


@pytest.mark.parametrize("decoded_cache", [True, False])
def test_whole_photos_flip_by_turns_each_mirrored_in_every_other_pass(
    photo_files, monkeypatch, decoded_cache
):
    pattern, photos, transform_output = photo_files
    if not decoded_cache:
        monkeypatch.setattr(input_pipeline, "DECODED_CACHE_MAX_BYTES", 1)
    whole = [
        unit_range(decode_encoded_image(tf.constant(photo), PHOTOS)).numpy() for photo in photos
    ]
    index_of = {bytes(image): (index, False) for index, image in enumerate(whole)}
    index_of |= {bytes(image[:, ::-1]): (index, True) for index, image in enumerate(whole)}
    alternating = Augmentation(flip=True, flip_alternates=True)

    batches = make_dataset(
        [pattern], transform_output, PHOTOS, 8, seed=1, shuffle_buffer=40, augmentation=alternating
    )

    passes = [{}, {}, {}]
    for step, (images, _) in enumerate(batches.take(15)):  # three passes over the 40 photos
        for row, image in enumerate(images.numpy()):
            index, mirrored = index_of[bytes(image)]
            passes[(step * 8 + row) // 40][index] = mirrored
    first, second, third = passes
    assert sorted(first) == sorted(second) == list(range(40))
    assert all(first[index] != second[index] == (not third[index]) for index in first)
    assert 5 < sum(first.values()) < 35  # about half start mirrored
