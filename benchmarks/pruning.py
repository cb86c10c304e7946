"""The `pruning` bench section: what trainer.pruning costs in accuracy and saves in size.

On the real built-in data (scikit-learn's 1,797 digits, the 1,000 shipped MNIST
records), each target sparsity trains the default model with the Trainer's own
recipe (TrainerConfig defaults: cnn_bn, its optimizer and schedule; no
augmentation) and its pruning code, then is exported as the Trainer exports it
(stripped) and converted by the serving code: the SavedModel, the float32
TFLite and the pruned (sparse-format) TFLite, each measured on the eval third
for accuracy and for its size gzipped. Sparsity 0 is the unpruned baseline,
trained from the same seed on the same split.
"""

from __future__ import annotations

import gzip
import tempfile

import numpy as np
import tensorflow as tf
import tf_keras

from tpu_pipeline.common.config import (
    BUILTIN_DATA_DIR,
    BUILTIN_DATASETS,
    DatasetConfig,
    PruningConfig,
    TrainerConfig,
)
from tpu_pipeline.components.models import build_model, compile_model, serving_copy
from tpu_pipeline.components.serving.export import PIXELS_SIGNATURE, SERVING_OUTPUT_KEY
from tpu_pipeline.components.serving.tflite_variants import (
    array_batches,
    convert,
    measure_tflite,
    pixels_converter,
    read_split,
    saved_model_bytes,
)
from tpu_pipeline.components.training.learning_rate import make_optimizer
from tpu_pipeline.components.training.pruning import (
    prune_for_training,
    pruning_callbacks,
    strip_pruned,
)

SPARSITIES = (0.0, 0.5, 0.8)
EVAL_FRACTION = 1 / 3


def _digits() -> tuple[DatasetConfig, np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    dataset = DatasetConfig(**BUILTIN_DATASETS["digits"])
    return dataset, digits.data.reshape(-1, *dataset.image_shape), digits.target


def _mnist() -> tuple[DatasetConfig, np.ndarray, np.ndarray]:
    dataset = DatasetConfig(**BUILTIN_DATASETS["mnist"])
    files = [str(BUILTIN_DATA_DIR / "mnist" / dataset.file_pattern)]
    pixels, labels = read_split(files, dataset)
    return dataset, pixels, labels


DATASETS = {"digits": _digits, "mnist": _mnist}


def _split(dataset: DatasetConfig, pixels: np.ndarray, labels: np.ndarray) -> tuple:
    """Pixels scaled to [0, 1] as the Transform scales them, shuffled once, a third held out."""
    low, high = dataset.source.image_value_range
    images = ((pixels - low) / (high - low)).astype(np.float32)
    order = np.random.default_rng(0).permutation(len(labels))
    held_out = int(len(labels) * EVAL_FRACTION)
    eval_part, train_part = order[:held_out], order[held_out:]
    return images[train_part], labels[train_part], images[eval_part], labels[eval_part]


def _train(
    dataset: DatasetConfig, sparsity: float, train_images, train_labels, epochs: int | None
) -> tuple:
    """The stripped model and what strip_pruned recorded (None unpruned)."""
    pruned = PruningConfig(target_sparsity=sparsity) if sparsity else None
    config = TrainerConfig(pruning=pruned, **({"epochs": epochs} if epochs else {}))
    tf_keras.utils.set_random_seed(config.seed)
    batch = config.per_replica_batch_size
    steps = len(train_labels) // batch
    total = steps * config.epochs
    model = build_model(config.model, dataset.image_shape, dataset.num_classes, "float32")
    if config.pruning:
        model = prune_for_training(model, config.pruning, total)
    compile_model(model, make_optimizer(config, batch, steps, total), False, "float32")
    data = tf.data.Dataset.from_tensor_slices((train_images, train_labels))
    data = data.shuffle(len(train_labels), seed=config.seed).batch(batch, drop_remainder=True)
    model.fit(
        data.repeat(),
        epochs=config.epochs,
        steps_per_epoch=steps,
        callbacks=pruning_callbacks(config.pruning),
        verbose=0,
    )
    if not config.pruning:
        return model, None
    return strip_pruned(model, config.pruning, total)


def _save_pixels_model(model: tf_keras.Model, dataset: DatasetConfig, folder: str) -> None:
    """The SavedModel with the `pixels` signature the TFLite conversion starts from."""
    spec = tf.TensorSpec([None, *dataset.image_shape], tf.float32, name="pixels")

    @tf.function(input_signature=[spec])
    def serve(pixels: tf.Tensor) -> dict[str, tf.Tensor]:
        return {SERVING_OUTPUT_KEY: model(pixels, training=False)}

    model.save(folder, save_format="tf", signatures={PIXELS_SIGNATURE: serve})


def measure(name: str, sparsity: float, epochs: int | None = None) -> dict:
    """Accuracy and gzipped sizes of one dataset's model trained to one sparsity
    (over `epochs`, or the Trainer's default)."""
    dataset, pixels, labels = DATASETS[name]()
    train_images, train_labels, eval_images, eval_labels = _split(dataset, pixels, labels)
    trained, info = _train(dataset, sparsity, train_images, train_labels, epochs)
    # What the Trainer exports: a fresh float32 build with the weights (no optimizer slots).
    model = serving_copy(trained.get_weights(), TrainerConfig().model, dataset)
    accuracy = float(np.mean(model.predict(eval_images, verbose=0).argmax(1) == eval_labels))
    with tempfile.TemporaryDirectory() as folder:
        _save_pixels_model(model, dataset, folder)
        figures = {
            "accuracy": accuracy,
            "sparsity": info["sparsity"] if info else 0.0,
            "saved_model_gzip": saved_model_bytes(folder)[1],
        }
        for variant in ("float32", "pruned"):
            tflite = convert(
                pixels_converter(folder), variant, array_batches(train_images[:1], train_labels[:1])
            )
            figures[f"{variant}_bytes"] = len(tflite)
            figures[f"{variant}_gzip"] = len(gzip.compress(tflite))
            figures[f"{variant}_accuracy"], _ = measure_tflite(
                tflite, array_batches(eval_images, eval_labels), 1
            )
    return figures


def rows(row_type, datasets=tuple(DATASETS), epochs: int | None = None) -> list:
    """The bench table's rows: per dataset and sparsity, accuracy and size against unpruned.

    Args:
      row_type: the bench table's row class.
      datasets: names in DATASETS to measure.
      epochs: each training's epochs; None: the Trainer's default.
    """
    result = []
    for name in datasets:
        baseline = measure(name, 0.0, epochs)
        result.append(
            row_type(
                "pruning",
                f"{name}: unpruned accuracy; SavedModel, float32 TFLite gzipped",
                f"{baseline['accuracy']:.4f}; {baseline['saved_model_gzip'] / 1024:.0f} KB, "
                f"{baseline['float32_gzip'] / 1024:.0f} KB",
                None,
            )
        )
        for sparsity in SPARSITIES[1:]:
            pruned = measure(name, sparsity, epochs)
            drop = baseline["accuracy"] - pruned["accuracy"]
            result += [
                row_type(
                    "pruning",
                    f"{name} sparsity {sparsity:g} (reached {pruned['sparsity']:.3f}): "
                    "accuracy drop vs unpruned",
                    f"{pruned['accuracy']:.4f} vs {baseline['accuracy']:.4f}",
                    drop,
                ),
                row_type(
                    "pruning",
                    f"{name} sparsity {sparsity:g}: SavedModel gzipped / unpruned",
                    f"{pruned['saved_model_gzip'] / 1024:.0f} vs "
                    f"{baseline['saved_model_gzip'] / 1024:.0f} KB",
                    pruned["saved_model_gzip"] / baseline["saved_model_gzip"],
                ),
                row_type(
                    "pruning",
                    f"{name} sparsity {sparsity:g}: pruned TFLite (accuracy "
                    f"{pruned['pruned_accuracy']:.4f}) / unpruned float32 TFLite, gzipped",
                    f"{pruned['pruned_gzip'] / 1024:.0f} vs "
                    f"{baseline['float32_gzip'] / 1024:.0f} KB "
                    f"({pruned['pruned_bytes'] / 1024:.0f} KB raw)",
                    pruned["pruned_gzip"] / baseline["float32_gzip"],
                ),
            ]
    return result


if __name__ == "__main__":  # one figure set, for a quick look: python -m benchmarks.pruning
    import json

    for name in DATASETS:
        for sparsity in SPARSITIES:
            print(name, sparsity, json.dumps(measure(name, sparsity)))
