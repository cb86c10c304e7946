"""Each format through its real ExampleGen executor: same features out, splits kept or hashed."""

from __future__ import annotations

import numpy as np
import pytest

from cli.synthetic_data import synthetic_images, write_synthetic
from components.example_gen.errors import DataFormatError
from tests.components.example_gen.conftest import make_dataset, run_executor

COUNT, EVAL_COUNT = 30, 10

# (generator format, dataset format, shape, source options, source keeps train/test splits)
FORMAT_CASES = [
    ("tfrecord", "tfrecord", "mnist", {"id_feature": "id"}, False),
    (
        "tfrecord_png",
        "tfrecord",
        "cifar10",
        {"pixel_feature": "image", "pixel_encoding": "image"},
        False,
    ),
    ("npz", "npz", "mnist", {}, True),
    ("idx", "idx", "mnist", {}, True),
    ("cifar10_binary", "cifar10_binary", "cifar10", {}, True),
    ("image_folder", "image_folder", "mnist", {}, False),
    ("csv", "csv", "mnist", {}, False),
]


def _pairs(examples) -> list[tuple[bytes, int]]:
    """(pixels, label) of each example, sorted: equal lists mean equal data in any order."""
    return sorted(
        (
            np.asarray(e.features.feature["pixels"].float_list.value, np.float32).tobytes(),
            e.features.feature["label"].int64_list.value[0],
        )
        for e in examples
    )


@pytest.mark.parametrize(
    "generated, data_format, shape, source, keeps_splits",
    FORMAT_CASES,
    ids=[case[0] for case in FORMAT_CASES],
)
def test_format_becomes_float_pixels_and_int_labels_through_example_gen(
    tmp_path, output_dir, generated, data_format, shape, source, keeps_splits
):
    write_synthetic(tmp_path / "raw", generated, COUNT, shape, EVAL_COUNT, seed=3)
    dataset = make_dataset(data_format, shape, source=source)

    splits = run_executor(dataset, tmp_path / "raw", output_dir)

    everything = splits["train"] + splits["eval"]
    images, labels = synthetic_images(COUNT, dataset.image_shape, seed=3)
    expected = sorted(
        (image.astype(np.float32).reshape(-1).tobytes(), int(label))
        for image, label in zip(images, labels, strict=True)
    )
    assert _pairs(everything) == expected  # every pixel and label, in HWC order
    features = {"pixels", "label"} | ({"id"} if "id_feature" in source else set())
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
