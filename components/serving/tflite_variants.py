"""TFLite variants of the exported model, each measured against the SavedModel before it ships.

The ServingPackager writes them into the served model it makes from the Trainer's
export (`model_folder.py`), so the variants live inside that model artifact
(`tflite/`) and the Pusher's one copy
publishes them with the SavedModel: the same version number, the same atomic
rename, and only files that were measured. Each variant converts the
SavedModel's `pixels` signature (TFLite's builtin ops cannot parse
`tf.Example`s or decode images) and is classified on the same eval images as the
SavedModel: the first `serving.measured_examples` of the shuffled eval split (all of a
smaller one), read a batch at a time, so memory does not grow with the split; a
variant whose accuracy falls more than `serving.max_accuracy_drop` below the
SavedModel's is held back and `tflite/measurements.json` says why. The
measurements (accuracy, size, single-image latency on the CPU that ran the
ServingPackager) travel with the model into the run summary and report.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import pathlib
import platform
import statistics
import time
from collections.abc import Callable, Iterator

import numpy as np
import tensorflow as tf
from absl import logging

from tpu_pipeline.common.config import DatasetConfig, ServingConfig, TFLiteVariant
from tpu_pipeline.common.free_heap import return_free_heap
from tpu_pipeline.components.images.batching import images_per_call
from tpu_pipeline.components.images.examples import parse_pixels
from tpu_pipeline.components.serving.export import (
    PIXELS_INPUT_KEY,
    PIXELS_SIGNATURE,
    SERVING_OUTPUT_KEY,
)
from tpu_pipeline.components.serving.measurements import MEASUREMENTS_PATH, SAVED_MODEL, TFLITE_DIR

# Single-image latency is measured as an edge device runs it: one interpreter thread.
INTERPRETER_THREADS = 1
# Images decoded and classified at a time, for small images; fewer for large ones
# (`images_per_call`): what measuring holds, however large the split.
MEASURE_BATCH = 32


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One model on the eval split. `file` is relative to the model folder; None if held back."""

    name: str
    file: str | None
    accuracy: float
    accuracy_drop: float  # SavedModel accuracy minus this model's
    size_bytes: int
    gzip_bytes: int  # as downloaded compressed: where pruned zeros pay off for every variant
    latency_ms: float  # median single-image latency
    published: bool
    reason: str


def split_batches(
    file_patterns: list[str], dataset: DatasetConfig, limit: int | None = None
) -> tf.data.Dataset:
    """Batches of (pixels [n, height, width, channels], labels [n]) of ExampleGen's gzipped
    examples: the first `limit` records, in file order.

    The pixels are the `pixels` signature's input: photos are decoded and resized. Each
    pass over the dataset reads the files again, so memory holds one batch whatever the
    split's size, and every pass sees the same records.
    """
    files = sorted(path for pattern in file_patterns for path in tf.io.gfile.glob(pattern))
    records = tf.data.TFRecordDataset(files, compression_type="GZIP")
    if limit is not None:
        records = records.take(limit)
    return records.batch(images_per_call(dataset.image_shape, MEASURE_BATCH)).map(
        lambda batch: parse_pixels(batch, dataset), num_parallel_calls=tf.data.AUTOTUNE
    )


def read_split(
    file_patterns: list[str], dataset: DatasetConfig, limit: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """All of `split_batches` in memory: pixels [n, ...] and labels [n].

    For tools that hold a small split whole (the pruning benchmark, the TF.js check);
    the ServingPackager's measurements stream `split_batches` instead.
    """
    batches = list(split_batches(file_patterns, dataset, limit).as_numpy_iterator())
    if not batches:
        raise ValueError(f"no examples in {file_patterns}")
    return np.concatenate([p for p, _ in batches]), np.concatenate([y for _, y in batches])


def array_batches(pixels: np.ndarray, labels: np.ndarray) -> tf.data.Dataset:
    """(pixels, labels) arrays as the batches `convert` and `measure_tflite` take."""
    return tf.data.Dataset.from_tensor_slices((pixels, labels)).batch(MEASURE_BATCH)


def pixels_converter(saved_model_dir: str) -> tf.lite.TFLiteConverter:
    """A converter of the SavedModel's `pixels` signature, for every variant `convert` makes.

    Loading the SavedModel is most of a small model's conversion (0.55 s of 1.15 s for
    digits), so the variants share one load; `convert` sets every option a variant uses,
    so each variant's file is the same as a fresh converter's (tests/components/serving).
    """
    return tf.lite.TFLiteConverter.from_saved_model(
        saved_model_dir, signature_keys=[PIXELS_SIGNATURE]
    )


def convert(
    converter: tf.lite.TFLiteConverter, variant: TFLiteVariant, representative: tf.data.Dataset
) -> bytes:
    """Converts the `pixels` signature (a `pixels_converter`) into one TFLite variant.

    float16 and dynamic_int8 quantize the weights only (float inputs); int8 is
    full-integer, inputs and outputs included, calibrated on `representative`
    training images (batches from `split_batches`, streamed), for integer-only
    accelerators and microcontrollers.
    pruned keeps float32 weights and stores the kernels `trainer.pruning`
    zeroed in TFLite's sparse format, so the file itself shrinks.
    """
    optimizations = {
        "float32": [],
        "pruned": [tf.lite.Optimize.EXPERIMENTAL_SPARSITY],
    }.get(variant, [tf.lite.Optimize.DEFAULT])
    full_integer = variant == "int8"

    def calibration_images() -> Iterator[list[np.ndarray]]:
        for images, _ in representative.as_numpy_iterator():
            for image in images:
                yield [image[np.newaxis].astype(np.float32)]

    converter.optimizations = optimizations
    converter.target_spec.supported_types = {tf.float16} if variant == "float16" else set()
    converter.target_spec.supported_ops = {
        tf.lite.OpsSet.TFLITE_BUILTINS_INT8 if full_integer else tf.lite.OpsSet.TFLITE_BUILTINS
    }
    converter.representative_dataset = calibration_images if full_integer else None
    converter.inference_input_type = tf.int8 if full_integer else tf.float32
    converter.inference_output_type = tf.int8 if full_integer else tf.float32
    return converter.convert()


def _median_ms(seconds: list[float]) -> float:
    return round(statistics.median(seconds) * 1000, 4)


def _classify_one_by_one(
    predict: Callable[[np.ndarray], np.ndarray], batches: tf.data.Dataset, timed: int
) -> tuple[float, float]:
    """Accuracy on `batches`, one image per call; median latency of the first `timed` images."""
    correct = seen = 0
    seconds: list[float] = []
    for images, labels in batches.as_numpy_iterator():
        for image, label in zip(images, labels, strict=True):
            start = time.perf_counter()
            scores = predict(image[np.newaxis])
            if seen < timed:
                seconds.append(time.perf_counter() - start)
            correct += int(np.argmax(scores)) == label
            seen += 1
    if not seen:
        raise ValueError("no examples to measure on")
    return correct / seen, _median_ms(seconds)


def measure_tflite(model: bytes, batches: tf.data.Dataset, timed: int) -> tuple[float, float]:
    """Accuracy on `batches` of (pixels, labels) and median single-image latency in ms."""
    interpreter = tf.lite.Interpreter(model_content=model, num_threads=INTERPRETER_THREADS)
    runner = interpreter.get_signature_runner(PIXELS_SIGNATURE)
    details = runner.get_input_details()[PIXELS_INPUT_KEY]

    def predict(image: np.ndarray) -> np.ndarray:
        if details["dtype"] == np.int8:  # full-integer: quantize the pixels as calibrated
            scale, zero_point = details["quantization"]
            image = np.clip(np.round(image / scale + zero_point), -128, 127).astype(np.int8)
        return runner(**{PIXELS_INPUT_KEY: image})[SERVING_OUTPUT_KEY]

    return _classify_one_by_one(predict, batches, timed)


def measure_saved_model(
    classify: Callable[[tf.Tensor], tf.Tensor], batches: tf.data.Dataset, timed: int
) -> tuple[float, float, int]:
    """Accuracy of the `pixels` signature (the variants' source; `classify` calls it), a
    batch per call, its single-image latency on the first `timed` images, and how many
    images it classified."""

    def predict(images: np.ndarray) -> np.ndarray:
        return classify(tf.constant(images)).numpy()

    correct = seen = 0
    for images, labels in batches.as_numpy_iterator():
        correct += int(np.sum(predict(images).argmax(axis=1) == labels))
        seen += len(labels)
    if not seen:
        raise ValueError("no examples to measure on")
    first = batches.unbatch().take(timed).batch(MEASURE_BATCH)
    _, latency = _classify_one_by_one(predict, first, timed)
    return correct / seen, latency, seen


def saved_model_bytes(saved_model_dir: str) -> tuple[int, int]:
    """What a model server loads (the graph and the variables): bytes, and bytes gzipped."""
    files = [os.path.join(saved_model_dir, "saved_model.pb")]
    files += tf.io.gfile.glob(os.path.join(saved_model_dir, "variables", "*"))
    contents = [tf.io.gfile.GFile(path, "rb").read() for path in files]
    return sum(map(len, contents)), sum(len(gzip.compress(content)) for content in contents)


def held_back_reason(saved_model_accuracy: float, accuracy: float, bound: float) -> str | None:
    """Why a variant is not published, or None when its accuracy is within the bound."""
    drop = saved_model_accuracy - accuracy
    if drop <= bound + 1e-9:  # exactly at the bound passes
        return None
    return (
        f"accuracy {accuracy:.4f} is {drop:.4f} below the SavedModel's {saved_model_accuracy:.4f} "
        f"(serving.max_accuracy_drop: {bound})"
    )


def cpu_name() -> str:
    """The processor the latencies were measured on."""
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def export_tflite_variants(
    export_dir: str,
    classify: Callable[[tf.Tensor], tf.Tensor],
    train_files: list[str],
    eval_files: list[str],
    dataset: DatasetConfig,
    config: ServingConfig,
) -> list[Measurement]:
    """Converts, measures and keeps the variants within the bound; writes measurements.json.

    Args:
      export_dir: the exported SavedModel; variants go to its `tflite/` folder.
      classify: its `pixels` signature, loaded (`PixelClassifier`): what the variants
        are measured against.
      train_files: ExampleGen's training split (calibration images for int8).
      eval_files: ExampleGen's eval split (shuffled by ExampleGen): its first
        `config.measured_examples` records are measured, streamed a batch at a time.
      dataset: shapes and feature names.
      config: which variants, the accuracy bound, how many images to measure and time.

    Returns:
      The SavedModel's measurement first, then one per configured variant.
    """
    if not config.tflite_variants:
        return []
    start = time.perf_counter()
    measured = split_batches(eval_files, dataset, limit=config.measured_examples)
    representative = split_batches(train_files, dataset, limit=config.representative_examples)
    timed = config.latency_examples
    reference, latency, examples = measure_saved_model(classify, measured, timed)
    measurements = [
        Measurement(
            SAVED_MODEL, ".", reference, 0.0, *saved_model_bytes(export_dir), latency, True, ""
        )
    ]
    tf.io.gfile.makedirs(os.path.join(export_dir, TFLITE_DIR))
    converter = None
    for variant in config.tflite_variants:
        # A conversion's copies of the weights are freed to the C heap, which keeps them:
        # given back first, each conversion starts from the same resident size.
        return_free_heap()
        step = "conversion"
        try:
            converter = converter or pixels_converter(export_dir)
            model = convert(converter, variant, representative)
            # The interpreter can refuse what the converter wrote (a quantized layer whose
            # scales it does not accept): that variant too is held back, not the run.
            step = "TFLite interpreter"
            accuracy, latency = measure_tflite(model, measured, timed)
        except Exception as error:  # e.g. a user model with ops TFLite lacks: held back, not fatal
            reason = f"{step} failed: {str(error).strip().splitlines()[0]}"
            logging.warning("TFLite %s not built: %s", variant, error)
            measurements.append(
                Measurement(variant, None, 0.0, reference, 0, 0, 0.0, False, reason)
            )
            continue
        reason = held_back_reason(reference, accuracy, config.max_accuracy_drop)
        file = None if reason else os.path.join(TFLITE_DIR, f"{variant}.tflite")
        if file:
            with tf.io.gfile.GFile(os.path.join(export_dir, file), "wb") as handle:
                handle.write(model)
        drop = round(reference - accuracy, 6)
        measurements.append(
            Measurement(
                variant,
                file,
                accuracy,
                drop,
                len(model),
                len(gzip.compress(model)),
                latency,
                file is not None,
                reason or "",
            )
        )
    report = {
        "eval_examples": examples,
        "max_accuracy_drop": config.max_accuracy_drop,
        "measured_on": cpu_name(),
        "interpreter_threads": INTERPRETER_THREADS,
        "seconds": round(time.perf_counter() - start, 1),  # what converting and measuring cost
        "models": [dataclasses.asdict(measurement) for measurement in measurements],
    }
    with tf.io.gfile.GFile(os.path.join(export_dir, MEASUREMENTS_PATH), "w") as handle:
        handle.write(json.dumps(report, indent=2))
    return measurements
