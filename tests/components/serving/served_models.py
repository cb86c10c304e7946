"""Small SavedModels with the exported model's three signatures, and real digits to send them.

Each signature takes what `components/serving/export.py` publishes (serialized
examples, encoded images, pixels) and answers `probabilities`, so the warmup
writer and the serving check meet the same interface as with a trained model,
without a pipeline run. `broken` makes one signature fail or answer wrongly.
"""

from __future__ import annotations

import pathlib

import numpy as np
import tensorflow as tf

from tpu_pipeline.common.config import BUILTIN_DATASETS, DatasetConfig

DIGITS = DatasetConfig(**BUILTIN_DATASETS["digits"])


def write_eval_split(folder: pathlib.Path, count: int = 20) -> list[str]:
    """`count` real digits as ExampleGen writes them: gzipped tf.Examples."""
    from sklearn.datasets import load_digits  # imported here: collecting need not pay it

    digits = load_digits()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "data_tfrecord-00000-of-00001.gz"
    with tf.io.TFRecordWriter(str(path), options="GZIP") as writer:
        for pixels, label in zip(digits.data[:count], digits.target[:count], strict=True):
            feature = {
                DIGITS.pixel_feature: tf.train.Feature(float_list=tf.train.FloatList(value=pixels)),
                DIGITS.label_feature: tf.train.Feature(
                    int64_list=tf.train.Int64List(value=[label])
                ),
            }
            example = tf.train.Example(features=tf.train.Features(feature=feature))
            writer.write(example.SerializeToString())
    return [str(folder / "*")]


def eval_examples(folder: pathlib.Path, count: int) -> list[bytes]:
    """The first `count` serialized examples of a new eval split in `folder`."""
    (pattern,) = write_eval_split(folder, count)
    records = tf.data.TFRecordDataset(tf.io.gfile.glob(pattern), compression_type="GZIP")
    return [record.numpy() for record in records]


def save_model(path: pathlib.Path, broken: dict[str, str] | None = None) -> str:
    """A linear digits classifier with `serving_default`, `images` and `pixels`.

    `broken` maps a signature to how it misbehaves: "raises" (an op fails when
    run) or "wrong_shape" (one class too few).
    """
    broken = broken or {}
    classes = DIGITS.num_classes
    module = tf.Module()
    module.weights = tf.Variable(
        np.random.default_rng(0).normal(size=(64, classes)), dtype=tf.float32
    )

    def classify(name: str, pixels: tf.Tensor) -> dict[str, tf.Tensor]:
        flat = tf.reshape(pixels, [-1, 64])
        if broken.get(name) == "raises":
            tf.debugging.assert_equal(tf.shape(flat)[0], -1, message=f"{name} is broken")
        logits = tf.matmul(flat, module.weights)
        if broken.get(name) == "wrong_shape":
            logits = logits[:, 1:]
        return {"probabilities": tf.nn.softmax(logits)}

    spec = {DIGITS.pixel_feature: tf.io.FixedLenFeature([64], tf.float32)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serving_default(examples):
        return classify(
            "serving_default", tf.io.parse_example(examples, spec)[DIGITS.pixel_feature]
        )

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="images")])
    def images(encoded):
        decoded = tf.map_fn(
            lambda one: tf.cast(tf.io.decode_png(one, channels=1), tf.float32) * (16 / 255),
            encoded,
            fn_output_signature=tf.TensorSpec([8, 8, 1], tf.float32),
        )
        return classify("images", decoded)

    @tf.function(input_signature=[tf.TensorSpec([None, 8, 8, 1], tf.float32, name="pixels")])
    def pixels(values):
        return classify("pixels", values)

    tf.saved_model.save(
        module,
        str(path),
        signatures={"serving_default": serving_default, "images": images, "pixels": pixels},
    )
    return str(path)
