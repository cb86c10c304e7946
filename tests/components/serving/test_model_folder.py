"""The ServingPackager's step: the served model made from the Trainer's export."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft

from tpu_pipeline.cli.synthetic_data import synthetic_dataset
from tpu_pipeline.common.config import ServingConfig
from tpu_pipeline.components.drift.reference import read_drift_reference
from tpu_pipeline.components.models import build_model
from tpu_pipeline.components.serving import model_folder
from tpu_pipeline.components.serving.export import GRAD_CAM_LAYER_KEY, export_serving_model
from tpu_pipeline.components.serving.measurements import read_measurements
from tpu_pipeline.components.serving.model_folder import package_model
from tpu_pipeline.components.serving.temperature import (
    TEMPERATURE_INFO_KEY,
    TemperatureFit,
    rescale,
)
from tpu_pipeline.components.serving.warmup import read_warmup_requests, write_warmup_requests

DATASET = synthetic_dataset("idx")  # 8-bit pixels: the Transform graph's table in the graph
SERVING = ServingConfig(
    tflite_variants=("float32",),
    temperature_scaling=True,
    measured_examples=40,
    representative_examples=10,
    latency_examples=5,
)


def _split(folder: pathlib.Path, images: np.ndarray) -> list[str]:
    """The images as ExampleGen writes them: gzipped tf.Examples of bytes and a label."""
    folder.mkdir(parents=True)
    with tf.io.TFRecordWriter(str(folder / "data.gz"), options="GZIP") as writer:
        for index, image in enumerate(images):
            feature = {
                "pixels": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image.tobytes()])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[index % 10])),
            }
            writer.write(
                tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
            )
    return [str(folder / "*")]


@pytest.fixture
def trained(eight_bit_transform, tmp_path):
    """A Trainer's export with warmup requests (the same ones the ServingPackager writes),
    its Transform graph and splits."""
    images, _, _, graph = eight_bit_transform
    transform = tft.TFTransformOutput(graph)
    files = _split(tmp_path / "train", images), _split(tmp_path / "eval", images)
    model = build_model("mnist_cnn", DATASET.image_shape, DATASET.num_classes)
    trained_dir = str(tmp_path / "trained")
    export_serving_model(model, transform, DATASET, trained_dir, {"model": "mnist_cnn"})
    write_warmup_requests(trained_dir, files[1], DATASET)
    return trained_dir, transform, files, images


def _package(trained, tmp_path, monkeypatch, fit: TemperatureFit) -> str:
    trained_dir, transform, (train_files, eval_files), _ = trained
    monkeypatch.setattr(model_folder, "fit_temperature", lambda *answers: fit)
    served = str(tmp_path / "served")
    package_model(
        trained_dir,
        served,
        transform,
        DATASET,
        SERVING,
        train_files=train_files,
        eval_files=eval_files,
    )
    return served


def _answers(model_dir: str, images: np.ndarray) -> np.ndarray:
    pixels = tf.constant(images.astype(np.float32))
    return tf.saved_model.load(model_dir).signatures["pixels"](pixels=pixels)["probabilities"]


def _info(model_dir: str) -> dict:
    return json.loads((pathlib.Path(model_dir) / "assets.extra" / "training_info.json").read_text())


def test_an_applied_temperature_is_served_with_everything_the_served_folder_carries(
    trained, tmp_path, monkeypatch
):
    fit = TemperatureFit(0.5, 40, calibration_error_before=0.2, calibration_error_after=0.1)
    served = _package(trained, tmp_path, monkeypatch, fit)
    trained_dir, _, _, images = trained

    np.testing.assert_allclose(
        _answers(served, images), rescale(_answers(trained_dir, images).numpy(), 0.5), atol=1e-5
    )
    info = _info(served)
    assert info[TEMPERATURE_INFO_KEY] == fit.as_json() and info["model"] == "mnist_cnn"
    assert info[GRAD_CAM_LAYER_KEY] == _info(trained_dir)[GRAD_CAM_LAYER_KEY]  # kept by the export
    # What serving reads from the folder: the requests TF Serving replays, the reference
    # predict compares with, and each variant with its measurement.
    assert [r.model_spec.signature_name for r in read_warmup_requests(served)] == [
        "serving_default",
        "images",
        "pixels",
    ]
    assert read_drift_reference(served).describe() == "40 training and 40 eval images"
    measured = {m["name"]: m for m in read_measurements(served)["models"]}
    assert list(measured) == ["saved_model", "float32"]
    assert (pathlib.Path(served) / measured["float32"]["file"]).is_file()
    # The Trainer's folder is left as it was: a step writes only into its own output.
    assert not (pathlib.Path(trained_dir) / "tflite").exists()
    assert TEMPERATURE_INFO_KEY not in _info(trained_dir)


def test_a_temperature_that_would_not_help_is_recorded_and_the_trained_model_served_as_is(
    trained, tmp_path, monkeypatch
):
    fit = TemperatureFit(0.5, 40, calibration_error_before=0.1, calibration_error_after=0.2)
    served = _package(trained, tmp_path, monkeypatch, fit)
    trained_dir, _, _, _ = trained

    for name in ("saved_model.pb", "fingerprint.pb", "assets.extra/tf_serving_warmup_requests"):
        assert (pathlib.Path(served) / name).read_bytes() == (
            pathlib.Path(trained_dir) / name
        ).read_bytes(), name
    assert _info(served)[TEMPERATURE_INFO_KEY] == {**fit.as_json(), "applied": False}
    assert read_measurements(served) is not None


def test_a_temperature_scaled_copy_keeps_the_trained_models_test_time_flips(
    trained, tmp_path, monkeypatch
):
    _, transform, files, images = trained
    flipped_dir = str(tmp_path / "flipped")
    model = build_model("mnist_cnn", DATASET.image_shape, DATASET.num_classes)
    info = {"model": "mnist_cnn", "test_time_flip": True}  # as the Trainer records it
    export_serving_model(model, transform, DATASET, flipped_dir, info, test_time_flip=True)
    fit = TemperatureFit(0.5, 40, calibration_error_before=0.2, calibration_error_after=0.1)

    served = _package((flipped_dir, transform, files, images), tmp_path, monkeypatch, fit)

    answers = _answers(served, images).numpy()
    # Each image and its mirror get the same answer: the mean of both views, either way.
    np.testing.assert_allclose(answers, _answers(served, images[:, :, ::-1]), atol=1e-5)
    assert not np.allclose(answers, _answers(flipped_dir, images), atol=1e-3)  # and scaled
