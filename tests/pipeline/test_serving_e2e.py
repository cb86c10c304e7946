"""Every kind of client gets the model the pipeline blessed: images, pixels, TFLite variants."""

from __future__ import annotations

import io
import json
import pathlib
import shutil

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from tests.components.images.reference import pillow_pixels
from tests.pipeline.e2e_helpers import split_files
from tpu_pipeline.common.config import ServingConfig
from tpu_pipeline.components.serving import tflite_variants
from tpu_pipeline.components.serving.answers import PixelClassifier
from tpu_pipeline.components.serving.tflite_variants import (
    export_tflite_variants,
    measure_tflite,
    split_batches,
)

pytestmark = pytest.mark.slow

VARIANTS = ["saved_model", "float32", "float16", "dynamic_int8", "int8"]


def _png(pixels: np.ndarray, value_range: tuple[float, float]) -> bytes:
    """The image a client would have: pixels mapped onto 0-255, as an 8-bit PNG."""
    low, high = value_range
    gray = np.round((pixels[..., 0] - low) * 255 / (high - low)).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(gray).save(buffer, "PNG")
    return buffer.getvalue()


def _example(pixels: np.ndarray, pixel_feature: str) -> bytes:
    feature = tf.train.Feature(float_list=tf.train.FloatList(value=pixels.ravel()))
    return tf.train.Example(
        features=tf.train.Features(feature={pixel_feature: feature})
    ).SerializeToString()


def test_png_bytes_and_examples_of_the_decoded_pixels_predict_the_same(digits_run):
    config, summary = digits_run
    dataset = config.dataset
    pixels = np.concatenate(
        [images for images, _ in split_batches(split_files(config, "eval"), dataset, limit=64)]
    )
    pngs = [_png(image, dataset.source.image_value_range) for image in pixels]
    # ExampleGen's own decoder gives the pixels a training example of this PNG holds.
    decoded = [pillow_pixels(png, dataset) for png in pngs]
    examples = [_example(image, dataset.pixel_feature) for image in decoded]

    model = tf.saved_model.load(summary.pushed_model)
    from_images = model.signatures["images"](images=tf.constant(pngs))["probabilities"]
    from_examples = model.signatures["serving_default"](examples=tf.constant(examples))
    np.testing.assert_allclose(from_images, from_examples["probabilities"], atol=1e-6)
    from_pixels = model.signatures["pixels"](pixels=tf.constant(np.stack(decoded)))
    np.testing.assert_allclose(from_images, from_pixels["probabilities"], atol=1e-6)
    # The round trip through 8 bits keeps the digits: predictions match the originals'.
    original = model.signatures["pixels"](pixels=tf.constant(pixels))["probabilities"]
    agree = np.mean(np.argmax(original, 1) == np.argmax(from_images, 1))
    assert agree >= 0.95


def test_variants_are_measured_published_within_the_bound_and_in_the_summary(digits_run):
    config, summary = digits_run
    variants = {v["name"]: v for v in summary.serving_variants}
    assert list(variants) == VARIANTS
    saved_model = variants["saved_model"]
    # Measured on the whole eval split, as the Evaluator did: the same accuracy.
    assert saved_model["accuracy"] == pytest.approx(summary.metrics["accuracy"])
    assert saved_model["path"] == summary.pushed_model
    for name in VARIANTS[1:]:
        variant = variants[name]
        within = variant["accuracy_drop"] <= config.serving.max_accuracy_drop + 1e-9
        assert variant["published"] == within, variant
        if within:
            path = pathlib.Path(variant["path"])
            assert path.parent == pathlib.Path(summary.pushed_model) / "tflite"
            assert path.stat().st_size == variant["size_bytes"]
        else:
            assert variant["path"] is None and "max_accuracy_drop" in variant["reason"]
    assert variants["int8"]["size_bytes"] < variants["float32"]["size_bytes"] / 2
    assert json.loads(summary.to_json())["serving_variants"] == summary.serving_variants


def test_a_published_variant_is_the_file_that_was_measured(digits_run):
    config, summary = digits_run
    batches = split_batches(split_files(config, "eval"), config.dataset)
    for variant in summary.serving_variants[1:]:
        if variant["published"]:
            model = pathlib.Path(variant["path"]).read_bytes()
            accuracy, _ = measure_tflite(model, batches, timed=1)
            assert accuracy == pytest.approx(variant["accuracy"]), variant["name"]


def test_a_variant_beyond_the_bound_is_held_back_with_the_reason(digits_run, tmp_path, monkeypatch):
    config, summary = digits_run
    export_dir = tmp_path / "model"
    shutil.copytree(summary.pushed_model, export_dir)
    shutil.rmtree(export_dir / "tflite")
    real_measure = tflite_variants.measure_tflite

    def int8_loses_two_points(model, batches, timed):
        accuracy, latency = real_measure(model, batches, timed)
        is_int8 = tf.lite.Interpreter(model_content=model).get_input_details()[0]["dtype"]
        return (accuracy - 0.02, latency) if is_int8 == np.int8 else (accuracy, latency)

    monkeypatch.setattr(tflite_variants, "measure_tflite", int8_loses_two_points)
    measured = export_tflite_variants(
        str(export_dir),
        PixelClassifier(str(export_dir)),
        split_files(config, "train"),
        split_files(config, "eval"),
        config.dataset,
        ServingConfig(tflite_variants=("float32", "int8"), latency_examples=5),
    )
    by_name = {m.name: m for m in measured}
    assert by_name["float32"].published and (export_dir / "tflite" / "float32.tflite").exists()
    assert not by_name["int8"].published and not (export_dir / "tflite" / "int8.tflite").exists()
    assert "below the SavedModel" in by_name["int8"].reason
    written = json.loads((export_dir / "tflite" / "measurements.json").read_text())
    assert [m["published"] for m in written["models"]] == [True, True, False]


def test_a_variant_that_cannot_convert_is_held_back_not_fatal(digits_run, tmp_path, monkeypatch):
    config, summary = digits_run
    export_dir = tmp_path / "model"
    shutil.copytree(summary.pushed_model, export_dir)
    shutil.rmtree(export_dir / "tflite")
    real_convert = tflite_variants.convert

    def float16_fails(saved_model_dir, variant, representative):
        if variant == "float16":
            raise RuntimeError("op not supported by TFLite builtins\nmore detail")
        return real_convert(saved_model_dir, variant, representative)

    monkeypatch.setattr(tflite_variants, "convert", float16_fails)
    measured = export_tflite_variants(
        str(export_dir),
        PixelClassifier(str(export_dir)),
        split_files(config, "train"),
        split_files(config, "eval"),
        config.dataset,
        ServingConfig(tflite_variants=("float16", "float32"), latency_examples=5),
    )
    assert [(m.name, m.published) for m in measured] == [
        ("saved_model", True),
        ("float16", False),
        ("float32", True),
    ]
    assert measured[1].reason == "conversion failed: op not supported by TFLite builtins"
