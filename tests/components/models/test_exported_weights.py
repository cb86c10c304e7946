"""An exported model's weights go back into a model built anew, read from its checkpoint alone.

The export keeps no layer traces, so Keras could not revive a network holding a layer of
the user's own that is not registered: the warm start and the temperature-scaled copy
build the network themselves and read the weights by the object paths both share.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
import tf_keras

from tpu_pipeline.components.models import restore_exported_weights


class _Doubled(tf_keras.layers.Layer):
    """A user's own layer with a weight, known to no Keras registry."""

    def build(self, input_shape):
        self.gain = self.add_weight("gain", shape=(input_shape[-1],), initializer="ones")

    def call(self, inputs):
        return inputs * self.gain


def _network(filters: int) -> tf_keras.Model:
    inputs = tf_keras.Input((8, 8, 1))
    x = tf_keras.layers.Conv2D(filters, 3)(inputs)
    x = tf_keras.layers.BatchNormalization()(x)
    x = _Doubled()(tf_keras.layers.GlobalAveragePooling2D()(x))
    return tf_keras.Model(inputs, tf_keras.layers.Dense(3, activation="softmax")(x))


def _export(model: tf_keras.Model, export_dir: str) -> None:
    """As the export saves: signatures, no optimizer, no traces, another object attached."""
    model.extra_table = tf.Variable([1.0, 2.0])  # as the Transform layer rides along

    @tf.function(input_signature=[tf.TensorSpec([None, 8, 8, 1], tf.float32)])
    def serve(pixels):
        return {"probabilities": model(pixels, training=False)}

    model.save(
        export_dir,
        save_format="tf",
        signatures={"serving_default": serve},
        include_optimizer=False,
        save_traces=False,
    )


def _trained(filters: int) -> tf_keras.Model:
    model = _network(filters)
    model.set_weights([np.random.default_rng(1).normal(size=w.shape) for w in model.get_weights()])
    return model


def test_the_same_network_gets_every_weight_and_answers_alike(tmp_path):
    trained = _trained(4)
    weights = trained.get_weights()
    _export(trained, str(tmp_path / "model"))
    fresh = _network(4)

    assert restore_exported_weights(fresh, str(tmp_path / "model"))

    for restored, original in zip(fresh.get_weights(), weights, strict=True):
        np.testing.assert_array_equal(restored, original)  # moving statistics too
    pixels = np.random.default_rng(2).normal(size=(2, 8, 8, 1)).astype("float32")
    np.testing.assert_allclose(fresh(pixels), trained(pixels), rtol=1e-6)


def test_another_network_is_refused_and_left_as_it_was(tmp_path):
    _export(_trained(4), str(tmp_path / "model"))
    wider = _network(6)
    before = wider.get_weights()

    assert not restore_exported_weights(wider, str(tmp_path / "model"))

    for kept, original in zip(wider.get_weights(), before, strict=True):
        np.testing.assert_array_equal(kept, original)
