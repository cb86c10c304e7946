"""Synthetic image data in the real shapes (MNIST 28x28x1, CIFAR-10 32x32x3), in every format.

Each class is a fixed random pattern plus noise, so a model can learn it and
accuracy still means something in tests and benchmarks. The writers produce
the files each format's reader expects, the way the public datasets ship them.
"""

from __future__ import annotations

import gzip
import io
import pathlib
import struct

import numpy as np
from PIL import Image

from tpu_pipeline.common.atomic_folder import new_folder
from tpu_pipeline.common.config import DatasetConfig

SHAPES = {"mnist": (28, 28, 1), "cifar10": (32, 32, 3)}
FORMATS = ("tfrecord", "tfrecord_png", "npz", "idx", "cifar10_binary", "image_folder", "csv")


def synthetic_dataset(data_format: str, shape_name: str = "mnist", **fields) -> DatasetConfig:
    """The dataset of files `write_synthetic` wrote in `data_format` (its feature names)."""
    return DatasetConfig(
        name="synthetic",
        image_shape=SHAPES[shape_name],
        pixel_feature="pixels",
        label_feature="label",
        num_classes=10,
        format=data_format,
        **fields,
    )


def synthetic_images(
    count: int, shape: tuple[int, int, int], num_classes: int = 10, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Returns uint8 images [count, *shape] and int64 labels cycling through the classes."""
    rng = np.random.default_rng(seed)
    patterns = rng.integers(0, 256, size=(num_classes, *shape))
    labels = rng.permutation(np.arange(count) % num_classes).astype(np.int64)
    noise = rng.integers(0, 256, size=(count, *shape))
    return (0.7 * patterns[labels] + 0.3 * noise).astype(np.uint8), labels


def png_bytes(image: np.ndarray) -> bytes:
    """Encodes a uint8 [height, width, 1 or 3] image as PNG."""
    buffer = io.BytesIO()
    Image.fromarray(image.squeeze(-1) if image.shape[-1] == 1 else image).save(buffer, "PNG")
    return buffer.getvalue()


def write_synthetic(
    output: pathlib.Path, data_format: str, count: int, shape_name: str, eval_count: int, seed: int
) -> pathlib.Path:
    """Writes `count` images (the last `eval_count` as the test split where the format has one).

    The folder appears atomically and an existing one is never overwritten.
    Formats: tfrecord (float `pixels`), tfrecord_png (PNG bytes in `image`),
    npz, idx, cifar10_binary, image_folder, csv; labels are named `label`.
    """
    if data_format not in FORMATS:
        raise ValueError(f"unknown format {data_format!r}; choose from {', '.join(FORMATS)}")
    if not 0 <= eval_count < count:
        raise ValueError(f"eval_count must be in [0, count), got {eval_count} of {count}")
    images, labels = synthetic_images(count, SHAPES[shape_name], seed=seed)
    with new_folder(output) as folder:
        _WRITERS[data_format](folder, images, labels, count - eval_count)
    return output


def _write_tfrecord(folder, images, labels, _train_count, encode=False):
    import tensorflow as tf  # only this writer needs it; the CLI lists formats without it

    with tf.io.TFRecordWriter(str(folder / "data.tfrecord")) as writer:
        for index, (image, label) in enumerate(zip(images, labels, strict=True)):
            if encode:
                pixels = tf.train.Feature(bytes_list=tf.train.BytesList(value=[png_bytes(image)]))
                name = "image"
            else:
                pixels = tf.train.Feature(float_list=tf.train.FloatList(value=image.reshape(-1)))
                name = "pixels"
            feature = {
                name: pixels,
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
                "id": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"%d" % index])),
            }
            example = tf.train.Example(features=tf.train.Features(feature=feature))
            writer.write(example.SerializeToString())


def _write_npz(folder, images, labels, train_count):
    stored = images.squeeze(-1) if images.shape[-1] == 1 else images  # Keras' own layout
    np.savez_compressed(
        folder / "data.npz",
        x_train=stored[:train_count],
        y_train=labels[:train_count].astype(np.uint8),
        x_test=stored[train_count:],
        y_test=labels[train_count:].astype(np.uint8),
    )


def _write_idx(folder, images, labels, train_count):
    stored = images.squeeze(-1) if images.shape[-1] == 1 else images
    for prefix, part in (("train", slice(0, train_count)), ("t10k", slice(train_count, None))):
        for kind, array in (("images-idx3", stored[part]), ("labels-idx1", labels[part])):
            header = struct.pack(f">BBBB{array.ndim}I", 0, 0, 0x08, array.ndim, *array.shape)
            data = header + array.astype(np.uint8).tobytes()
            (folder / f"{prefix}-{kind}-ubyte.gz").write_bytes(gzip.compress(data))


def _write_cifar10_binary(folder, images, labels, train_count):
    for name, part in (
        ("data_batch_1", slice(0, train_count)),
        ("test_batch", slice(train_count, None)),
    ):
        channels_first = images[part].transpose(0, 3, 1, 2).reshape(len(labels[part]), -1)
        records = np.concatenate([labels[part, None].astype(np.uint8), channels_first], axis=1)
        (folder / f"{name}.bin").write_bytes(records.tobytes())


def _write_image_folder(folder, images, labels, _train_count):
    for index, (image, label) in enumerate(zip(images, labels, strict=True)):
        class_folder = folder / str(label)
        class_folder.mkdir(exist_ok=True)
        (class_folder / f"{index:06d}.png").write_bytes(png_bytes(image))


def _write_csv(folder, images, labels, _train_count):
    header = ",".join(["label", *(f"pixel{i}" for i in range(images[0].size))])
    rows = np.concatenate([labels[:, None], images.reshape(len(images), -1)], axis=1)
    np.savetxt(folder / "data.csv", rows, fmt="%d", delimiter=",", header=header, comments="")


_WRITERS = {
    "tfrecord": _write_tfrecord,
    "tfrecord_png": lambda *args: _write_tfrecord(*args, encode=True),
    "npz": _write_npz,
    "idx": _write_idx,
    "cifar10_binary": _write_cifar10_binary,
    "image_folder": _write_image_folder,
    "csv": _write_csv,
}
