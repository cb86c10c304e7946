"""The drift reference kept with a model: what it holds, read back, and a damaged one."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image
from sklearn.datasets import load_digits

from tpu_pipeline.common.config import BUILTIN_DATASETS, DatasetConfig
from tpu_pipeline.components.drift.reference import (
    REFERENCE_PATH,
    DamagedReference,
    read_drift_reference,
    write_drift_reference,
)
from tpu_pipeline.components.drift.signals import pixel_signals
from tpu_pipeline.components.example_gen.examples import ExampleBuilder


def _write(path, examples) -> str:
    with tf.io.TFRecordWriter(str(path), options="GZIP") as writer:
        for example in examples:
            writer.write(example.SerializeToString())
    return str(path)


def _always(class_index: int, classes: int):
    def predict(serialized: tf.Tensor) -> np.ndarray:
        return np.eye(classes)[np.full(len(serialized), class_index)] * 0.9 + 0.01

    return predict


def test_training_images_and_eval_answers_are_kept_up_to_the_limit_and_read_back(tmp_path):
    dataset = DatasetConfig(**BUILTIN_DATASETS["digits"])
    digits = load_digits()
    builder = ExampleBuilder(dataset)
    pairs = zip(digits.images[:90], digits.target[:90], strict=True)
    examples = [builder.build(image, int(label), "digit") for image, label in pairs]
    train = _write(tmp_path / "train.gz", examples[:70])
    eval_ = _write(tmp_path / "eval.gz", examples[70:])

    written = write_drift_reference(
        str(tmp_path), [train], [eval_], dataset, 50, _always(3, dataset.num_classes)
    )

    assert written.describe() == "50 training and 20 eval images"
    kept = json.loads((tmp_path / REFERENCE_PATH).read_text())
    expected = pixel_signals(digits.images[:50, :, :, np.newaxis])
    assert kept["train"]["brightness"] == pytest.approx(expected["brightness"], abs=1e-6)
    assert kept["train"]["sharpness"] == pytest.approx(expected["sharpness"], abs=1e-6)
    assert kept["eval"]["predicted_class"] == ["3"] * 20
    assert kept["eval"]["confidence"] == pytest.approx([0.91] * 20)
    read = read_drift_reference(str(tmp_path))
    assert read.describe() == written.describe()
    assert list(read.answers["predicted_class"]) == ["3"] * 20
    assert read.images["contrast"] == pytest.approx(expected["contrast"], abs=1e-6)


def test_photos_keep_their_stored_size_and_format_as_categories(tmp_path):
    dataset = DatasetConfig(**BUILTIN_DATASETS["signs"])
    builder = ExampleBuilder(dataset)
    examples = []
    for index, (size, kind) in enumerate([((120, 80), "PNG"), ((90, 90), "JPEG")]):
        buffer = io.BytesIO()
        Image.new("RGB", size, (10 * index, 100, 200)).save(buffer, kind)
        examples.append(builder.build_image(buffer.getvalue(), index, f"photo{index}"))
    files = [_write(tmp_path / "photos.gz", examples)]

    write_drift_reference(str(tmp_path), files, files, dataset, 10, _always(0, 10))

    images = read_drift_reference(str(tmp_path)).images
    assert list(images["image_size"]) == ["120x80", "90x90"]
    assert list(images["image_format"]) == ["png", "jpeg"]
    assert images["channel_2_mean"] == pytest.approx([200, 200], abs=1)


def test_a_model_without_a_reference_has_none_and_a_damaged_one_is_named(tmp_path):
    assert read_drift_reference(str(tmp_path)) is None
    path = tmp_path / REFERENCE_PATH
    path.parent.mkdir()
    path.write_text('{"train": {"brightness": [1.0]')  # cut off, as by a full disk
    with pytest.raises(DamagedReference, match=f"{path} is damaged"):
        read_drift_reference(str(tmp_path))
    path.write_text('{"eval": {}}')
    with pytest.raises(DamagedReference, match="KeyError"):
        read_drift_reference(str(tmp_path))
