"""Every kind of bad input: one line naming the file (and record), exit 3, nothing written.

Each case goes through `tpu-pipeline data import`, which reads every record
with the readers ExampleGen uses; test_executor.py shows the executor fails
the same way. Nothing may land in data_dir: no span, no temporary folder.
"""

from __future__ import annotations

import gzip
import os
import pickle

import numpy as np
import pytest
import tensorflow as tf
import yaml
from PIL import Image

from tests.components.example_gen.conftest import real_photos, record_ends, scan_middle
from tpu_pipeline.cli.main import EXIT_DATA_REJECTED, main
from tpu_pipeline.cli.synthetic_data import write_synthetic

PHOTO_SHAPE = (100, 100, 3)


def _import(tmp_path, capsys, data_format, source, shape=(28, 28, 1), **source_options):
    """Runs `data import`; returns (exit code, stderr lines but progress, what data_dir holds)."""
    data_dir = tmp_path / "data"
    pattern = {"image_folder": "*/*", "idx": "*ubyte*"}.get(data_format, "*")
    dataset = dict(
        name="byod",
        data_dir=str(data_dir),
        file_pattern=f"span-{{SPAN}}/{pattern}",
        image_shape=list(shape),
        pixel_feature="pixels",
        label_feature="label",
        num_classes=10,
        format=data_format,
        source=source_options,
    )
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"dataset": dataset}))
    code = main(["data", "import", "--config", str(config), "--source", str(source)])
    held = sorted(p.name for p in data_dir.iterdir()) if data_dir.exists() else []
    shown = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in shown if not line.startswith("checking ")]  # not progress
    return code, errors, held


def _assert_rejected(result, *fragments):
    code, lines, held = result
    assert code == EXIT_DATA_REJECTED
    assert len(lines) == 1, lines
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert held == []


def _example(**features) -> bytes:
    def feature(value):
        if isinstance(value, bytes):
            return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))
        if isinstance(value, int):
            return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
        return tf.train.Feature(float_list=tf.train.FloatList(value=value))

    named = {name: feature(value) for name, value in features.items()}
    return tf.train.Example(features=tf.train.Features(feature=named)).SerializeToString()


def _tfrecord(path, *records):
    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)
    return path


def _png(path, array):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path)


def test_truncated_tfrecord(tmp_path, capsys):
    source = tmp_path / "raw"
    write_synthetic(source, "tfrecord", 5, "mnist", 0, seed=0)
    data = (source / "data.tfrecord").read_bytes()
    (source / "data.tfrecord").write_bytes(data[:-10])
    result = _import(tmp_path, capsys, "tfrecord", source)
    start = record_ends(data)[3]
    _assert_rejected(
        result, f"data.tfrecord: record 4 (byte {start}): the file is truncated or corrupted"
    )


def test_tfrecord_cut_inside_a_record_header(tmp_path, capsys):
    # TensorFlow's reader takes this for a shorter, valid file: 100 of 200 records, no error.
    source = tmp_path / "raw"
    write_synthetic(source, "tfrecord", 200, "mnist", 0, seed=0)
    data = (source / "data.tfrecord").read_bytes()
    cut = record_ends(data)[99]
    (source / "data.tfrecord").write_bytes(data[: cut + 5])
    result = _import(tmp_path, capsys, "tfrecord", source)
    _assert_rejected(
        result,
        f"data.tfrecord: byte {cut}: the file ends inside the header of record 100 "
        "(5 of its 12 bytes); the file is truncated",
    )


@pytest.mark.parametrize(
    "keep, fragment",
    [
        # Cut inside a record: TensorFlow notices, and the record is named.
        (0.5, "the file is truncated or corrupted"),
        # Only the gzip trailer is missing: every record is whole, so TensorFlow reads
        # them all without a word; the stream never reached its end marker.
        (-8, "the gzip stream ends without its end marker; the file is truncated"),
    ],
    ids=["inside-a-record", "end-marker"],
)
def test_truncated_gzip_tfrecord(tmp_path, capsys, keep, fragment):
    source = tmp_path / "raw"
    write_synthetic(source, "tfrecord", 200, "mnist", 0, seed=0)
    compressed = gzip.compress((source / "data.tfrecord").read_bytes(), mtime=0)
    (source / "data.tfrecord").unlink()
    end = int(len(compressed) * keep) if keep > 0 else len(compressed) + keep
    (source / "data.tfrecord.gz").write_bytes(compressed[:end])
    result = _import(tmp_path, capsys, "tfrecord", source)
    _assert_rejected(result, "data.tfrecord.gz: ", fragment)
    if keep < 0:
        assert f"byte {end}: " in result[1][0]


def test_not_a_tfrecord(tmp_path, capsys):
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "data.tfrecord").write_text("label,pixel0\n1,0\n" * 20)
    result = _import(tmp_path, capsys, "tfrecord", tmp_path / "raw")
    _assert_rejected(result, "data.tfrecord: record 0: the file is not a TFRecord file")


def test_missing_label_feature(tmp_path, capsys):
    source = _tfrecord(tmp_path / "raw" / "a.tfrecord", _example(pixels=[0.0] * 784))
    result = _import(tmp_path, capsys, "tfrecord", source.parent)
    _assert_rejected(result, "a.tfrecord: record 0: no label feature 'label'")


def test_label_out_of_class_range(tmp_path, capsys):
    (tmp_path / "raw").mkdir()
    header = ",".join(["label", *(f"p{i}" for i in range(784))])
    rows = ["3," + ",".join(["0"] * 784), "10," + ",".join(["0"] * 784)]
    (tmp_path / "raw" / "d.csv").write_text("\n".join([header, *rows]) + "\n")
    result = _import(tmp_path, capsys, "csv", tmp_path / "raw")
    _assert_rejected(result, "d.csv: line 3: label 10 is outside the class range [0, 9]")


def test_wrong_pixel_count(tmp_path, capsys):
    source = _tfrecord(
        tmp_path / "raw" / "a.tfrecord",
        _example(pixels=[0.0] * 784, label=1),
        _example(pixels=[0.0] * 700, label=1),
    )
    result = _import(tmp_path, capsys, "tfrecord", source.parent)
    _assert_rejected(result, "a.tfrecord: record 1: 700 pixel values, expected 784")


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_pixels(tmp_path, capsys, bad):
    images = np.zeros((2, 28, 28), np.float32)
    images[1, 3, 4] = bad
    (tmp_path / "raw").mkdir()
    np.savez(tmp_path / "raw" / "d.npz", x_train=images, y_train=np.array([0, 1], np.uint8))
    result = _import(tmp_path, capsys, "npz", tmp_path / "raw")
    _assert_rejected(result, f"d.npz: x_train[1]: pixel {3 * 28 + 4} is {bad}")


def test_undecodable_image_bytes(tmp_path, capsys):
    source = _tfrecord(
        tmp_path / "raw" / "a.tfrecord", _example(image=b"\x89PNG but not really", label=2)
    )
    options = {"pixel_feature": "image", "pixel_encoding": "image"}
    result = _import(tmp_path, capsys, "tfrecord", source.parent, **options)
    _assert_rejected(result, "a.tfrecord: record 0: cannot decode the image")


def test_truncated_jpeg_in_an_image_folder(tmp_path, capsys):
    photo = real_photos()[0].read_bytes()
    (tmp_path / "raw" / "4").mkdir(parents=True)
    (tmp_path / "raw" / "4" / "whole.jpg").write_bytes(photo)
    (tmp_path / "raw" / "4" / "cut.jpg").write_bytes(photo[: scan_middle(photo)])
    result = _import(tmp_path, capsys, "image_folder", tmp_path / "raw", shape=PHOTO_SHAPE)
    _assert_rejected(
        result, "4/cut.jpg: cannot decode the image: the JPEG data is cut short or broken"
    )


def test_jpeg_broken_in_the_middle_is_named_by_file_and_record(tmp_path, capsys):
    # A marker inside the entropy-coded data: libjpeg (Pillow's and TensorFlow's) stops.
    photo = real_photos()[0].read_bytes()
    middle = scan_middle(photo)
    broken = photo[:middle] + b"\xff\xc0" + photo[middle + 2 :]
    images = [photo, photo, broken, photo]
    records = [_example(image=image, label=index) for index, image in enumerate(images)]
    source = _tfrecord(tmp_path / "raw" / "a.tfrecord", *records)
    options = {"pixel_feature": "image", "pixel_encoding": "image"}
    result = _import(tmp_path, capsys, "tfrecord", source.parent, shape=PHOTO_SHAPE, **options)
    _assert_rejected(
        result, "a.tfrecord: record 2: cannot decode the image: the JPEG data is cut short"
    )


@pytest.mark.parametrize(
    "name, image, fragment",
    [
        ("cmyk.jpg", Image.new("CMYK", (28, 28)), "image mode CMYK (4 channels) is not grayscale"),
        ("gray.tif", Image.new("L", (28, 28)), "image format TIFF is not one TensorFlow decodes"),
    ],
    ids=["cmyk-jpeg", "tiff"],
)
def test_image_the_trainer_could_not_decode_is_refused(tmp_path, capsys, name, image, fragment):
    (tmp_path / "raw" / "2").mkdir(parents=True)
    image.save(tmp_path / "raw" / "2" / name)
    result = _import(tmp_path, capsys, "image_folder", tmp_path / "raw")
    _assert_rejected(result, f"2/{name}: {fragment}")


def test_image_with_alpha_channel(tmp_path, capsys):
    _png(tmp_path / "raw" / "3" / "rgba.png", np.zeros((28, 28, 4), np.uint8))
    result = _import(tmp_path, capsys, "image_folder", tmp_path / "raw")
    _assert_rejected(result, "rgba.png: image mode RGBA (4 channels) is not grayscale or RGB")


def test_empty_input(tmp_path, capsys):
    (tmp_path / "raw").mkdir()
    result = _import(tmp_path, capsys, "image_folder", tmp_path / "raw")
    _assert_rejected(result, "no image_folder input file matches")


def test_empty_file(tmp_path, capsys):
    source = _tfrecord(tmp_path / "raw" / "a.tfrecord")
    result = _import(tmp_path, capsys, "tfrecord", source.parent)
    _assert_rejected(result, "a.tfrecord: holds no examples")


def test_mixed_image_sizes_in_a_folder(tmp_path, capsys):
    _png(tmp_path / "raw" / "1" / "a.png", np.zeros((28, 28), np.uint8))
    _png(tmp_path / "raw" / "1" / "b.png", np.zeros((30, 30), np.uint8))
    result = _import(tmp_path, capsys, "image_folder", tmp_path / "raw")
    _assert_rejected(result, "b.png: image is 30x30, expected 28x28", "source.resize")


def test_npz_with_object_arrays(tmp_path, capsys):
    (tmp_path / "raw").mkdir()
    images = np.empty(2, dtype=object)
    images[:] = [np.zeros(784), np.zeros(784)]
    np.savez(tmp_path / "raw" / "d.npz", x_train=images, y_train=np.array([0, 1]))
    result = _import(tmp_path, capsys, "npz", tmp_path / "raw")
    _assert_rejected(result, "d.npz: array x_train cannot be loaded without pickle")


@pytest.mark.parametrize(
    "data_format, name",
    [
        ("cifar10_binary", "data_batch_1.bin"),
        ("npz", "data.npz"),
        ("csv", "data.csv"),
        ("tfrecord", "data.tfrecord"),
        ("image_folder", "0/img.png"),
    ],
)
def test_pickle_under_any_name_is_never_loaded(tmp_path, capsys, data_format, name):
    # The CIFAR-10 "python version" layout: a pickled dict of data and labels.
    path = tmp_path / "raw" / name
    path.parent.mkdir(parents=True)
    path.write_bytes(pickle.dumps({b"data": np.zeros((2, 3072), np.uint8), b"labels": [0, 1]}))
    shape = (32, 32, 3) if data_format == "cifar10_binary" else (28, 28, 1)
    result = _import(tmp_path, capsys, data_format, tmp_path / "raw", shape=shape)
    _assert_rejected(result, f"{name}: is a Python pickle", "CIFAR-10 binary version")


def test_idx_with_wrong_magic_number(tmp_path, capsys):
    source = tmp_path / "raw"
    write_synthetic(source, "idx", 4, "mnist", 1, seed=0)
    (source / "train-images-idx3-ubyte.gz").unlink()
    (source / "train-images-idx3-ubyte").write_bytes(b"\x00\x00\x0c\x03" + bytes(100))
    result = _import(tmp_path, capsys, "idx", source)
    _assert_rejected(result, "train-images-idx3-ubyte: wrong IDX magic number 0x00000c03")


def test_idx_labels_file_without_its_images_file(tmp_path, capsys):
    source = tmp_path / "source" / "span-1"
    write_synthetic(source, "idx", 4, "mnist", 1, seed=0)
    (source / "train-images-idx3-ubyte.gz").unlink()
    result = _import(tmp_path, capsys, "idx", source)
    _assert_rejected(
        result, "train-labels-idx1-ubyte.gz: no images file", "train-images-idx3-ubyte[.gz]"
    )


def test_csv_missing_label_column(tmp_path, capsys):
    (tmp_path / "raw").mkdir()
    header = ",".join(f"p{i}" for i in range(785))
    (tmp_path / "raw" / "d.csv").write_text(header + "\n" + ",".join(["0"] * 785) + "\n")
    result = _import(tmp_path, capsys, "csv", tmp_path / "raw")
    _assert_rejected(result, "d.csv: no column 'label' in the header")


def test_unreadable_file(tmp_path, capsys, monkeypatch):
    source = tmp_path / "raw"
    write_synthetic(source, "npz", 4, "mnist", 1, seed=0)
    locked = source / "data.npz"
    os.chmod(locked, 0)
    if os.geteuid() == 0:  # root reads any file: fail the open the way GFile fails it
        real_gfile = tf.io.gfile.GFile

        def gfile(path, mode="r"):
            if str(path) == str(locked):
                raise tf.errors.PermissionDeniedError(None, None, f"{path}; Permission denied")
            return real_gfile(path, mode)

        monkeypatch.setattr(tf.io.gfile, "GFile", gfile)
    result = _import(tmp_path, capsys, "npz", source)
    _assert_rejected(result, "data.npz: cannot read the file", "Permission denied")


def test_bad_import_leaves_existing_span_untouched(tmp_path, capsys):
    good, bad = tmp_path / "good", tmp_path / "bad"
    write_synthetic(good, "npz", 4, "mnist", 1, seed=0)
    bad.mkdir()
    (bad / "d.npz").write_bytes(b"not a zip")
    assert _import(tmp_path, capsys, "npz", good)[0] == 0
    before = (tmp_path / "data" / "span-1" / "data.npz").read_bytes()

    result = _import(tmp_path, capsys, "npz", bad)

    assert result[0] == EXIT_DATA_REJECTED and "d.npz: not an .npz archive" in result[1][0]
    assert result[2] == ["span-1"]
    assert (tmp_path / "data" / "span-1" / "data.npz").read_bytes() == before
