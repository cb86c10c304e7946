"""Each format through its real ExampleGen executor: same features out, splits kept or hashed."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import tensorflow as tf

from tests.components.example_gen.conftest import make_dataset, record_ends, run_executor
from tpu_pipeline.cli.synthetic_data import png_bytes, synthetic_images, write_synthetic
from tpu_pipeline.common.config import BUILTIN_DATASETS, DatasetConfig
from tpu_pipeline.components.contract import (
    IMAGE_FORMAT_FEATURE,
    IMAGE_HEIGHT_FEATURE,
    IMAGE_WIDTH_FEATURE,
)
from tpu_pipeline.components.example_gen.errors import DataFormatError
from tpu_pipeline.components.images.examples import parse_pixels

COUNT, EVAL_COUNT = 30, 10

# (generator format, dataset format, shape, source options, source keeps train/test splits)
FORMAT_CASES = [
    ("tfrecord", "tfrecord", "mnist", {"id_feature": "id"}, False),
    (
        "tfrecord_png",
        "tfrecord",
        "cifar10",
        {"pixel_feature": "image", "pixel_encoding": "image", "id_feature": "id"},
        False,
    ),
    ("npz", "npz", "mnist", {}, True),
    ("idx", "idx", "mnist", {}, True),
    ("cifar10_binary", "cifar10_binary", "cifar10", {}, True),
    ("image_folder", "image_folder", "mnist", {}, False),
    ("csv", "csv", "mnist", {}, False),
]
# The generated formats holding PNG bytes: their examples keep them (stores_encoded_images).
ENCODED = {"tfrecord_png", "image_folder"}
# The formats of unsigned-byte pixels: their examples keep them as bytes (stores_8bit_pixels).
EIGHT_BIT = {"idx", "cifar10_binary"}


def _pairs(examples, dataset: DatasetConfig) -> list[tuple[bytes, int]]:
    """(pixels, label) of each example, sorted: equal lists mean equal data in any order.

    Float pixels come as their float32 bytes, 8-bit pixels as the float32 bytes they
    decode to (the floats they were stored as before); an encoded image as its bytes.
    """
    encoded, eight_bit = dataset.stores_encoded_images, dataset.stores_8bit_pixels

    def pixels(example) -> bytes:
        feature = example.features.feature["pixels"]
        kind = "bytes_list" if encoded or eight_bit else "float_list"
        assert feature.WhichOneof("kind") == kind
        if encoded:
            (image,) = feature.bytes_list.value
            return image
        if eight_bit:  # one value of pixel_count bytes, read the way every consumer reads it
            (raw,) = feature.bytes_list.value
            assert len(raw) == dataset.pixel_count
            decoded, _ = parse_pixels(tf.constant([example.SerializeToString()]), dataset)
            return decoded.numpy().astype(np.float32).reshape(-1).tobytes()
        return np.asarray(feature.float_list.value, np.float32).tobytes()

    return sorted((pixels(e), e.features.feature["label"].int64_list.value[0]) for e in examples)


@pytest.mark.parametrize(
    "generated, data_format, shape, source, keeps_splits",
    FORMAT_CASES,
    ids=[case[0] for case in FORMAT_CASES],
)
def test_format_becomes_its_pixels_or_image_bytes_and_int_labels_through_example_gen(
    tmp_path, output_dir, generated, data_format, shape, source, keeps_splits
):
    write_synthetic(tmp_path / "raw", generated, COUNT, shape, EVAL_COUNT, seed=3)
    dataset = make_dataset(data_format, shape, source=source)

    splits = run_executor(dataset, tmp_path / "raw", output_dir)

    everything = splits["train"] + splits["eval"]
    encoded = dataset.stores_encoded_images
    assert encoded == (generated in ENCODED)
    assert dataset.stores_8bit_pixels == (generated in EIGHT_BIT)
    images, labels = synthetic_images(COUNT, dataset.image_shape, seed=3)
    expected = sorted(
        (png_bytes(image) if encoded else image.astype(np.float32).reshape(-1).tobytes(), label)
        for image, label in zip(images, labels.tolist(), strict=True)
    )
    # Every pixel in HWC order, or every PNG as it was written.
    assert _pairs(everything, dataset) == expected
    features = {"pixels", "label"} | ({"id"} if "id_feature" in source else set())
    if encoded:  # what StatisticsGen describes: each stored image's size and format
        features |= {IMAGE_HEIGHT_FEATURE, IMAGE_WIDTH_FEATURE, IMAGE_FORMAT_FEATURE}
        height, width, _ = dataset.image_shape
        for example in everything:
            feature = example.features.feature
            assert feature[IMAGE_HEIGHT_FEATURE].int64_list.value == [height]
            assert feature[IMAGE_WIDTH_FEATURE].int64_list.value == [width]
            assert feature[IMAGE_FORMAT_FEATURE].bytes_list.value == [b"png"]
    assert all(set(e.features.feature) == features for e in everything)
    if keeps_splits:
        assert (len(splits["train"]), len(splits["eval"])) == (COUNT - EVAL_COUNT, EVAL_COUNT)
    else:  # hash split 4:1; both splits non-empty
        assert splits["train"] and splits["eval"]


def test_bad_record_fails_the_executor_with_one_line_and_no_output(tmp_path, output_dir):
    raw = tmp_path / "raw"
    raw.mkdir()
    images = np.zeros((3, 28, 28), np.float32)
    images[2, 0, 5] = np.nan
    np.savez(raw / "data.npz", x_train=images, y_train=np.array([1, 2, 3]))

    with pytest.raises(DataFormatError) as raised:
        run_executor(make_dataset("npz"), raw, output_dir)

    message = str(raised.value)
    assert message == f"{raw / 'data.npz'}: x_train[2]: pixel 5 is nan (1 non-finite values)"
    assert not list(output_dir.rglob("*.gz"))


@pytest.mark.parametrize("name", ["mnist.tfrecord.gz", "mnist.tfrecord"])
def test_layout_ready_gzip_tfrecords_are_copied_unchanged_whatever_their_name(
    tmp_path, output_dir, mnist_tfrecord, name
):
    # Gzip is told by the first bytes, not the name: the second case has no .gz suffix.
    raw = tmp_path / "raw"
    raw.mkdir()
    shutil.copy(mnist_tfrecord, raw / name)
    dataset = DatasetConfig(
        **{**BUILTIN_DATASETS["mnist"], "data_dir": str(raw), "file_pattern": name}
    )

    splits = run_executor(dataset, raw, output_dir)

    copied = sorted(e.SerializeToString() for e in splits["train"] + splits["eval"])
    source = tf.data.TFRecordDataset(str(mnist_tfrecord), compression_type="GZIP")
    assert copied == sorted(record.numpy() for record in source)
    assert len(copied) == 1000


def test_layout_ready_tfrecord_cut_inside_a_record_header_fails_the_executor(tmp_path, output_dir):
    raw = tmp_path / "raw"
    write_synthetic(raw, "tfrecord", 40, "mnist", 0, seed=3)
    data = (raw / "data.tfrecord").read_bytes()
    cut = record_ends(data)[19]
    (raw / "data.tfrecord").write_bytes(data[: cut + 7])

    with pytest.raises(DataFormatError) as raised:
        run_executor(make_dataset("tfrecord"), raw, output_dir)

    assert str(raised.value) == (
        f"{raw / 'data.tfrecord'}: byte {cut}: the file ends inside the header of record 20 "
        "(7 of its 12 bytes); the file is truncated"
    )
    assert not list(output_dir.rglob("*.gz"))


@pytest.mark.parametrize(
    "source, eval_folder",
    [({}, "test"), ({"id_feature": "id"}, "test"), ({}, "val"), ({}, "validation")],
    ids=["unchanged", "converted", "val", "validation"],
)
def test_tfrecords_in_train_and_test_folders_keep_that_split(
    tmp_path, output_dir, source, eval_folder
):
    raw = tmp_path / "raw"
    write_synthetic(tmp_path / "train", "tfrecord", 20, "mnist", 0, seed=1)
    write_synthetic(tmp_path / "test", "tfrecord", 10, "mnist", 0, seed=2)
    for split, folder in (("train", "train"), ("test", eval_folder)):
        (raw / folder).mkdir(parents=True)
        (tmp_path / split / "data.tfrecord").rename(raw / folder / "data.tfrecord")
    dataset = make_dataset("tfrecord", file_pattern="*/*.tfrecord*", source=source)

    splits = run_executor(dataset, raw, output_dir)

    assert (len(splits["train"]), len(splits["eval"])) == (20, 10)  # not hash-split 4:1
    _, test_labels = synthetic_images(10, dataset.image_shape, seed=2)
    assert sorted(e.features.feature["label"].int64_list.value[0] for e in splits["eval"]) == (
        sorted(test_labels)
    )


# (generator format, dataset format, file name suffix): a copied and a converted format.
SPLIT_PATTERN_CASES = [("tfrecord", "tfrecord", ".tfrecord"), ("csv", "csv", ".csv")]


def _write_parts(raw, generated: str, suffix: str, parts: dict[str, tuple[int, int]]) -> None:
    """Writes `{relative path without suffix: (count, seed)}` files of synthetic mnist images."""
    for name, (count, seed) in parts.items():
        folder = raw.parent / f"generated-{seed}"
        write_synthetic(folder, generated, count, "mnist", 0, seed=seed)
        (written,) = folder.glob(f"*{suffix}")
        target = raw / f"{name}{suffix}"
        target.parent.mkdir(parents=True, exist_ok=True)
        written.rename(target)


@pytest.mark.parametrize(
    "generated, data_format, suffix", SPLIT_PATTERN_CASES, ids=[c[0] for c in SPLIT_PATTERN_CASES]
)
def test_split_patterns_put_each_file_in_its_patterns_split(
    tmp_path, output_dir, generated, data_format, suffix
):
    raw = tmp_path / "raw"
    parts = {"fit/a": (12, 1), "fit/b": (8, 2), "holdout/c": (7, 3)}
    _write_parts(raw, generated, suffix, parts)
    patterns = {"train": f"fit/*{suffix}", "eval": f"holdout/*{suffix}"}
    dataset = make_dataset(data_format, split_patterns=patterns)

    splits = run_executor(dataset, raw, output_dir)

    assert (len(splits["train"]), len(splits["eval"])) == (20, 7)  # whole files, not hashed
    _, holdout_labels = synthetic_images(7, dataset.image_shape, seed=3)
    eval_labels = sorted(e.features.feature["label"].int64_list.value[0] for e in splits["eval"])
    assert eval_labels == sorted(holdout_labels)


def test_a_file_matched_by_both_split_patterns_is_rejected_naming_both(tmp_path, output_dir):
    raw = tmp_path / "raw"
    _write_parts(raw, "tfrecord", ".tfrecord", {"2023": (5, 1), "2024": (5, 2)})
    dataset = make_dataset("tfrecord", split_patterns={"train": "20*", "eval": "2024*"})

    with pytest.raises(DataFormatError) as raised:
        run_executor(dataset, raw, output_dir)

    assert str(raised.value) == (
        f"{raw / '2024.tfrecord'}: matched by both dataset.split_patterns.train '20*' and "
        f"dataset.split_patterns.eval '2024*' in {raw}; a file belongs to one split"
    )
    assert not list(output_dir.rglob("*.gz"))


def test_a_split_pattern_matching_nothing_is_rejected_naming_it_and_the_folder(
    tmp_path, output_dir
):
    raw = tmp_path / "raw"
    _write_parts(raw, "tfrecord", ".tfrecord", {"fit/a": (5, 1)})
    dataset = make_dataset("tfrecord", split_patterns={"train": "fit/*", "eval": "holdout/*"})

    with pytest.raises(
        DataFormatError,
        match=(
            f"^dataset.split_patterns.eval 'holdout/\\*' matches no tfrecord input file in {raw}$"
        ),
    ):
        run_executor(dataset, raw, output_dir)


def test_a_tfrecord_beside_the_split_folders_is_rejected_naming_it(tmp_path, output_dir):
    raw = tmp_path / "raw"
    _write_parts(
        raw, "tfrecord", ".tfrecord", {"train/a": (5, 1), "test/b": (5, 2), "extra/c": (5, 3)}
    )
    dataset = make_dataset("tfrecord", file_pattern="*/*.tfrecord*")

    with pytest.raises(DataFormatError, match=f"^{raw / 'extra' / 'c.tfrecord'}: is in no split"):
        run_executor(dataset, raw, output_dir)
