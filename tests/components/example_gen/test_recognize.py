"""A data folder is recognised from its layout and its files' bytes, or refused in one line.

The photos are the shipped hand photos (real JPEGs) and PNGs written here; the other
formats are small files in their real layouts.
"""

from __future__ import annotations

import gzip
import pathlib
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from tpu_pipeline.common.config import BUILTIN_DATA_DIR, BUILTIN_DATASETS, DatasetConfig
from tpu_pipeline.components.example_gen.errors import DataFormatError
from tpu_pipeline.components.example_gen.recognize import recognize_folder

HANDS = BUILTIN_DATA_DIR / "sign-language-digits"
TAKEN = frozenset(BUILTIN_DATASETS)


def _copy_hands(destination: pathlib.Path, classes=("0", "1", "2"), split="train", count=6):
    for name in classes:
        (destination / name).mkdir(parents=True)
        for photo in sorted((HANDS / split / name).iterdir())[:count]:
            shutil.copy(photo, destination / name / photo.name)
    return destination


def _pngs(folder: pathlib.Path, count: int, mode: str = "L") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        Image.new(mode, (12, 10), color=index * 9 if mode == "L" else (index, 0, 0)).save(
            folder / f"{index}.png"
        )


def _validated(found) -> DatasetConfig:
    return DatasetConfig.model_validate(found.dataset)


def test_class_folders_give_sorted_classes_colour_and_a_carved_eval_split(tmp_path):
    photos = _copy_hands(tmp_path / "Hand Photos", classes=("2", "0", "1"))
    (photos / ".DS_Store").write_bytes(b"finder")

    found = recognize_folder(photos, TAKEN)

    dataset = _validated(found)
    assert dataset.name == "hand-photos" and dataset.format == "image_folder"
    assert dataset.class_names == ("0", "1", "2") and dataset.image_shape[2] == 3
    assert dataset.split_patterns is None and dataset.file_pattern is None
    assert found.description.startswith("class folders: 18 photos of 3 classes (0, 1, 2)")
    assert "carved out by a hash of each path" in found.description


def test_split_folders_name_the_eval_split_and_a_second_eval_folder_is_left_out(tmp_path):
    _copy_hands(tmp_path / "hands" / "train", count=4)
    _copy_hands(tmp_path / "hands" / "validation", split="validation", count=2)
    _copy_hands(tmp_path / "hands" / "test", split="validation", count=2)
    (tmp_path / "hands" / "README.md").write_text("where the photos come from")

    found = recognize_folder(tmp_path / "hands", TAKEN)

    dataset = _validated(found)
    assert dataset.split_patterns.train == "train/*/*"
    assert dataset.split_patterns.eval == "validation/*/*"
    assert "test/ left out" in found.description


def test_one_wrapping_folder_is_looked_through(tmp_path):
    _copy_hands(tmp_path / "download" / "hands" / "train", count=4)
    _copy_hands(tmp_path / "download" / "hands" / "val", split="validation", count=2)

    found = recognize_folder(tmp_path / "download", TAKEN)

    assert found.dataset["data_dir"] == str(tmp_path / "download" / "hands")
    assert found.dataset["split_patterns"]["eval"] == "val/*/*"


def test_whole_number_class_names_sort_as_numbers_and_grayscale_has_one_channel(tmp_path):
    for name in ("10", "2", "1"):
        _pngs(tmp_path / "digits" / name, 4)

    dataset = _validated(recognize_folder(tmp_path / "digits", TAKEN))

    assert dataset.class_names == ("1", "2", "10")
    assert dataset.image_shape[2] == 1
    assert dataset.name == "digits-data"  # never the built-in dataset's name or schema


def test_one_colour_photo_among_grayscale_ones_makes_three_channels(tmp_path):
    _pngs(tmp_path / "p" / "a", 6)
    _pngs(tmp_path / "p" / "b", 5)
    Image.new("RGB", (12, 10), color=(200, 10, 10)).save(tmp_path / "p" / "b" / "red.png")

    assert recognize_folder(tmp_path / "p", TAKEN).dataset["image_shape"][2] == 3


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: (_pngs(p / "a", 6), (p / "b").mkdir()), "b: a class folder without images"),
        (lambda p: (_pngs(p / "a", 6), _pngs(p / "b" / "inner", 6)), "images at two depths"),
        (lambda p: (_pngs(p / "a", 6), _pngs(p / "b", 6), _pngs(p, 1)), "images at two depths"),
        (lambda p: _pngs(p / "a", 12), "one class folder (a)"),
        (lambda p: (_pngs(p / "a", 2), _pngs(p / "b", 1)), "3 photos in all"),
        (lambda p: (_pngs(p / "a", 9), _pngs(p / "b", 1)), "class folder b holds fewer than 2"),
        (
            lambda p: (_pngs(p / "a", 6), _pngs(p / "b", 6), (p / "b" / "labels.csv").touch()),
            "labels.csv: not an image",
        ),
        (
            lambda p: (_pngs(p / "train" / "a", 6), _pngs(p / "train" / "b", 6), _pngs(p / "x", 6)),
            "split folders (train) and other folders (x)",
        ),
        (
            lambda p: (
                _pngs(p / "train" / "a", 6),
                _pngs(p / "train" / "b", 6),
                _pngs(p / "val" / "c", 2),
            ),
            "class folder c has no training photos",
        ),
        (lambda p: _pngs(p, 12), "images without class folders"),
    ],
)
def test_an_odd_folder_is_refused_in_one_line_not_guessed(tmp_path, make, message):
    folder = tmp_path / "photos"
    folder.mkdir()
    make(folder)

    with pytest.raises(DataFormatError) as refused:
        recognize_folder(folder, TAKEN)

    assert message in str(refused.value) and "\n" not in str(refused.value)


def _idx(path: pathlib.Path, array: np.ndarray, kind: int) -> None:
    header = struct.pack(">BBBB", 0, 0, 8, array.ndim) + struct.pack(
        f">{array.ndim}I", *array.shape
    )
    path.write_bytes(gzip.compress(header + array.astype(np.uint8).tobytes()))


def test_idx_pairs_are_recognised_by_their_magic_numbers(tmp_path):
    images = np.zeros((20, 28, 28), np.uint8)
    _idx(tmp_path / "train-images-idx3-ubyte.gz", images, 3)
    _idx(tmp_path / "train-labels-idx1-ubyte.gz", np.arange(20) % 7, 1)

    dataset = _validated(recognize_folder(tmp_path, TAKEN))

    assert (dataset.format, dataset.image_shape, dataset.num_classes) == ("idx", (28, 28, 1), 7)


def test_cifar10_binary_is_recognised_by_its_records(tmp_path):
    records = np.zeros((5, 3073), np.uint8)
    records[:, 0] = [0, 3, 9, 1, 2]
    (tmp_path / "data_batch_1.bin").write_bytes(records.tobytes())

    dataset = _validated(recognize_folder(tmp_path, TAKEN))

    assert dataset.format == "cifar10_binary" and dataset.class_names[9] == "truck"


def test_npz_with_keras_keys_is_recognised(tmp_path):
    np.savez(tmp_path / "d.npz", x_train=np.zeros((8, 16, 16, 3)), y_train=np.arange(8) % 4)

    dataset = _validated(recognize_folder(tmp_path, TAKEN))

    assert (dataset.format, dataset.image_shape, dataset.num_classes) == ("npz", (16, 16, 3), 4)


def test_files_that_say_nothing_recognisable_leave_the_choice_to_the_configuration(tmp_path):
    (tmp_path / "table.csv").write_text("label,p0\n1,0.5\n")

    assert recognize_folder(tmp_path, TAKEN) is None


def test_a_tfrecord_name_on_bytes_of_another_kind_is_left_to_the_reader(tmp_path):
    # Its first 8 bytes read as a record length of exabytes: never asked of memory.
    (tmp_path / "digits.tfrecord").write_bytes(b"the user's data")

    assert recognize_folder(tmp_path, TAKEN) is None


def test_photos_without_class_folders_are_data_to_predict_on_only(tmp_path):
    photos = tmp_path / "photos"
    photos.mkdir()
    for index in range(10):
        Image.new("L", (8, 8), index * 20).save(photos / f"{index}.png")

    with pytest.raises(DataFormatError, match="images without class folders"):
        recognize_folder(photos, TAKEN)
    dataset = recognize_folder(photos, TAKEN, unlabelled=True).dataset
    assert (dataset["format"], dataset["file_pattern"], "num_classes" in dataset) == (
        "image_folder",
        "*",
        False,
    )


def test_the_shipped_mnist_tfrecords_are_recognised_by_their_features():
    dataset = _validated(recognize_folder(BUILTIN_DATA_DIR / "mnist", TAKEN))

    builtin = BUILTIN_DATASETS["mnist"]
    assert (dataset.pixel_feature, dataset.label_feature) == ("image_floats", "image_class")
    assert (dataset.image_shape, dataset.num_classes) == ((28, 28, 1), 10)
    assert dataset.image_shape == builtin["image_shape"] and dataset.name == "mnist-data"


def test_tfrecords_of_encoded_photos_and_an_ambiguous_label_is_refused(tmp_path):
    import tensorflow as tf

    photo = next((HANDS / "train" / "0").iterdir()).read_bytes()

    def example(**ints):
        feature = {"jpeg": tf.train.Feature(bytes_list=tf.train.BytesList(value=[photo]))}
        for name, value in ints.items():
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
        return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()

    (tmp_path / "ok").mkdir()
    with tf.io.TFRecordWriter(str(tmp_path / "ok" / "a.tfrecord")) as writer:
        for index in range(6):
            writer.write(example(label=index % 3, height=100))
    (tmp_path / "odd").mkdir()
    with tf.io.TFRecordWriter(str(tmp_path / "odd" / "a.tfrecord")) as writer:
        writer.write(example(a=1, b=2))

    dataset = _validated(recognize_folder(tmp_path / "ok", TAKEN))
    with pytest.raises(DataFormatError, match="which feature is the label is ambiguous"):
        recognize_folder(tmp_path / "odd", TAKEN)

    assert dataset.stores_encoded_images and dataset.pixel_feature == "jpeg"
    assert (dataset.label_feature, dataset.num_classes) == ("label", 3)


def test_recognising_tfrecords_loads_no_tensorflow():
    """A look at a folder takes well under a second: TensorFlow's import alone takes 10 s."""
    probe = (
        "import sys\n"
        "from components.example_gen.recognize import recognize_folder\n"
        f"found = recognize_folder({str(BUILTIN_DATA_DIR / 'mnist')!r})\n"
        "print(found.dataset['pixel_feature'], 'tensorflow' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)

    assert result.stdout.split() == ["image_floats", "False"], result.stderr
