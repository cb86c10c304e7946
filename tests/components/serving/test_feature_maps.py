"""Which layer's feature maps the exported model keeps for Grad-CAM."""

from __future__ import annotations

import pytest
import tf_keras

from tpu_pipeline.components.models import build_model
from tpu_pipeline.components.serving.export import feature_map_layer


@pytest.mark.parametrize(
    ("model", "shape", "layer", "maps"),
    [
        ("cnn_bn", (8, 8, 1), "block2_pool", (2, 2, 64)),
        ("mnist_cnn", (28, 28, 1), "pool2", (7, 7, 64)),
        ("resnet20", (32, 32, 3), "stage3_block3_relu", (8, 8, 64)),
    ],
)
def test_the_default_is_the_last_layer_with_feature_maps(model, shape, layer, maps):
    built = build_model(model, shape, 10, precision="float32")
    chosen = feature_map_layer(built, None)
    assert chosen.name == layer and tuple(chosen.output.shape[1:]) == maps
    assert feature_map_layer(built, layer) is chosen  # named, the same layer


def test_a_name_that_is_not_a_feature_map_layer_is_refused_naming_those_that_are():
    built = build_model("cnn_bn", (8, 8, 1), 10, precision="float32")
    dense = next(layer.name for layer in built.layers if isinstance(layer, tf_keras.layers.Dense))
    for name in (dense, "no_such_layer"):
        with pytest.raises(ValueError, match=rf"'{name}' is not a feature-map layer") as error:
            feature_map_layer(built, name)
        assert "block2_pool" in str(error.value)


def test_a_model_without_feature_maps_keeps_none():
    inputs = tf_keras.Input((8, 8, 1))
    flat = tf_keras.layers.Flatten()(inputs)
    model = tf_keras.Model(inputs, tf_keras.layers.Dense(3, activation="softmax")(flat))
    assert feature_map_layer(model, None) is None


def test_an_earlier_layer_can_be_named():
    built = build_model("cnn_bn", (8, 8, 1), 10, precision="float32")
    assert tuple(feature_map_layer(built, "block1_conv2_relu").output.shape[1:]) == (8, 8, 32)


def test_a_sequential_models_first_layer_counts_too():
    model = tf_keras.Sequential(
        [
            tf_keras.Input((8, 8, 1)),
            tf_keras.layers.Conv2D(4, 3, name="only_conv"),
            tf_keras.layers.Flatten(),
            tf_keras.layers.Dense(3, activation="softmax"),
        ]
    )
    assert feature_map_layer(model, None).name == "only_conv"
    assert feature_map_layer(model, "only_conv").name == "only_conv"


def test_grad_cam_on_a_model_exported_without_feature_maps_is_a_config_error_naming_it(tmp_path):
    import numpy as np

    from tests.components.serving.served_models import save_model
    from tpu_pipeline.common.config import ConfigError
    from tpu_pipeline.components.serving.answers import PixelClassifier

    model_dir = save_model(tmp_path / "model")  # its three signatures only, as before
    classify = PixelClassifier(model_dir)
    assert classify(np.zeros((1, 8, 8, 1), np.float32)).shape == (1, 10)
    with pytest.raises(ConfigError, match="grad_cam: the model in .* keeps no pixels_feature"):
        classify.feature_map_gradients(np.zeros((1, 8, 8, 1), np.float32), 0)
