"""Which TFLite variants are published, how the choice is configured, and what is measured."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf

from tests.components.serving.served_models import DIGITS, save_model, write_eval_split
from tpu_pipeline.common.config import ConfigError, ServingConfig, load_config
from tpu_pipeline.components.serving import tflite_variants
from tpu_pipeline.components.serving.answers import PixelClassifier
from tpu_pipeline.components.serving.tflite_variants import (
    MEASURE_BATCH,
    MEASUREMENTS_PATH,
    export_tflite_variants,
    held_back_reason,
)


def test_a_variant_within_the_bound_is_published_even_exactly_at_it():
    assert held_back_reason(0.99, 0.99, 0.01) is None
    assert held_back_reason(0.99, 0.98, 0.01) is None
    assert held_back_reason(0.99, 1.0, 0.0) is None


def test_a_variant_below_the_bound_is_held_back_saying_by_how_much():
    reason = held_back_reason(0.99, 0.97, 0.01)
    assert reason == (
        "accuracy 0.9700 is 0.0200 below the SavedModel's 0.9900 (serving.max_accuracy_drop: 0.01)"
    )


def test_variants_and_bound_are_configurable_and_checked():
    config = load_config(
        None, {"serving.tflite_variants": ["int8"], "serving.max_accuracy_drop": 0.05}
    )
    assert config.serving.tflite_variants == ("int8",)
    assert load_config().serving.tflite_variants == ("float32", "float16", "dynamic_int8", "int8")
    with pytest.raises(ConfigError, match="serving.tflite_variants"):
        load_config(None, {"serving.tflite_variants": ["int4"]})
    with pytest.raises(ConfigError, match="lists a variant twice"):
        load_config(None, {"serving.tflite_variants": ["int8", "int8"]})
    with pytest.raises(ConfigError, match="serving.max_accuracy_drop"):
        load_config(None, {"serving.max_accuracy_drop": 2})


def test_variants_are_measured_on_a_bounded_sample_streamed_in_batches(tmp_path, monkeypatch):
    model_dir = save_model(tmp_path / "model")
    eval_files = write_eval_split(tmp_path / "eval", count=100)
    train_files = write_eval_split(tmp_path / "train", count=60)
    measured_batches, calibration = [], {}
    real_measure, real_convert = tflite_variants.measure_tflite, tflite_variants.convert

    def recording_measure(model, batches, timed):
        measured_batches.append([len(labels) for _, labels in batches.as_numpy_iterator()])
        return real_measure(model, batches, timed)

    def recording_convert(converter, variant, representative):
        calibration[variant] = sum(len(labels) for _, labels in representative.as_numpy_iterator())
        return real_convert(converter, variant, representative)

    monkeypatch.setattr(tflite_variants, "measure_tflite", recording_measure)
    monkeypatch.setattr(tflite_variants, "convert", recording_convert)
    config = ServingConfig(
        tflite_variants=("float32", "int8"),
        max_accuracy_drop=1.0,
        measured_examples=40,
        representative_examples=10,
        latency_examples=5,
    )
    measured = export_tflite_variants(
        model_dir, PixelClassifier(model_dir), train_files, eval_files, DIGITS, config
    )

    # 40 of the 100 eval examples, a batch at a time, the same ones for every variant.
    assert measured_batches == [[MEASURE_BATCH, 40 - MEASURE_BATCH]] * 2
    assert calibration == {"float32": 10, "int8": 10}
    written = json.loads((tmp_path / "model" / MEASUREMENTS_PATH).read_text())
    assert written["eval_examples"] == 40
    assert [m.published for m in measured] == [True, True, True]


def test_a_variant_the_interpreter_refuses_is_held_back_and_the_others_published(
    tmp_path, monkeypatch
):
    model_dir = save_model(tmp_path / "model")
    eval_files = write_eval_split(tmp_path / "eval", count=40)
    real_measure = tflite_variants.measure_tflite
    refused = (
        "tensorflow/lite/kernels/kernel_util.cc:323 scale_diff / output_scale <= 0.02 was not true."
    )

    def measure(model, batches, timed):
        if tf.lite.Interpreter(model_content=model).get_input_details()[0]["dtype"] == np.int8:
            raise RuntimeError(f"{refused}Node number 7 (FULLY_CONNECTED) failed to prepare.\n")
        return real_measure(model, batches, timed)

    monkeypatch.setattr(tflite_variants, "measure_tflite", measure)
    config = ServingConfig(tflite_variants=("int8", "float32"), max_accuracy_drop=1.0)
    measured = export_tflite_variants(
        model_dir, PixelClassifier(model_dir), eval_files, eval_files, DIGITS, config
    )

    assert [(m.name, m.published) for m in measured] == [
        ("saved_model", True),
        ("int8", False),
        ("float32", True),
    ]
    assert measured[1].reason.startswith(f"TFLite interpreter failed: {refused}")
    assert not (tmp_path / "model" / "tflite" / "int8.tflite").exists()
    assert (tmp_path / "model" / "tflite" / "float32.tflite").exists()


def test_variants_converted_after_a_full_integer_one_are_what_a_fresh_converter_makes(tmp_path):
    """The variants share one loaded SavedModel: int8's options must not leak into the next."""
    model_dir = save_model(tmp_path / "model")
    representative = tflite_variants.split_batches(
        write_eval_split(tmp_path / "train", count=8), DIGITS
    )
    shared = tflite_variants.pixels_converter(model_dir)

    def fresh(variant):
        return tflite_variants.convert(
            tflite_variants.pixels_converter(model_dir), variant, representative
        )

    full_integer = tflite_variants.convert(shared, "int8", representative)
    assert full_integer == fresh("int8")
    for variant in ("float32", "float16"):
        assert tflite_variants.convert(shared, variant, representative) == fresh(variant), variant


def test_the_measured_sample_is_configurable_and_checked():
    assert load_config().serving.measured_examples == 2000
    assert load_config(None, {"serving.measured_examples": 50}).serving.measured_examples == 50
    with pytest.raises(ConfigError, match="serving.measured_examples"):
        load_config(None, {"serving.measured_examples": 0})


def test_read_split_holds_in_memory_exactly_the_records_split_batches_streams(mnist_tfrecord):
    from tpu_pipeline.common.config import BUILTIN_DATASETS, DatasetConfig

    dataset = DatasetConfig(**BUILTIN_DATASETS["mnist"])
    pixels, labels = tflite_variants.read_split([str(mnist_tfrecord)], dataset, limit=70)
    streamed = list(tflite_variants.split_batches([str(mnist_tfrecord)], dataset, 70))

    assert pixels.shape == (70, *dataset.image_shape) and labels.shape == (70,)
    assert [len(y) for _, y in streamed] == [MEASURE_BATCH, MEASURE_BATCH, 70 - 2 * MEASURE_BATCH]
    assert (labels == [y for _, batch in streamed for y in batch.numpy()]).all()
    again = list(tflite_variants.array_batches(pixels, labels))
    assert [len(y) for _, y in again] == [len(y) for _, y in streamed]
