"""Keras-application backbones: their own input scaling, bfloat16, and weights from a file.

No network here: weights files are ones the tests write themselves (a backbone
built with `weights=None`, saved as .h5), and what tf_keras would download for
`weights="imagenet"` is read from the request it makes, which the tests answer.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import pathlib
import tempfile

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from tf_keras.src.utils import data_utils

from tpu_pipeline.common.config import ConfigError, TrainerConfig
from tpu_pipeline.components import imagenet_files
from tpu_pipeline.components.models import (
    BACKBONES,
    _pretrained,
    build_model,
    check_backbone_settings,
    load_pretrained_weights,
    require_downloadable_weights,
)
from tpu_pipeline.components.models._backbone import (
    BACKBONE_LAYER,
    INPUT_SCALING_LAYER,
    WeightsFile,
)
from tpu_pipeline.components.models.efficientnet_b0 import IMAGENET_STDDEV_RGB

SHAPE = (32, 32, 3)
NAMES = sorted(BACKBONES)
# Each backbone's per-name checks; ResNet-50 and EfficientNet-B0 take seconds of CPU each
# to build, so they run in `make test` and the fast tier checks MobileNetV2, the smallest.
PER_BACKBONE = [
    name if name == "mobilenet_v2" else pytest.param(name, marks=pytest.mark.slow) for name in NAMES
]
# What each application's own preprocessing does to 0-255 RGB pixels.
PREPROCESS = {
    "efficientnet_b0": tf_keras.applications.efficientnet.preprocess_input,
    "resnet50": tf_keras.applications.resnet50.preprocess_input,
    "mobilenet_v2": tf_keras.applications.mobilenet_v2.preprocess_input,
}


def _images(shape=SHAPE, count=2) -> np.ndarray:
    return np.random.default_rng(0).random((count, *shape), dtype=np.float32)


def _scaled(model: tf_keras.Model, images: np.ndarray) -> np.ndarray:
    scaling = tf_keras.Model(model.input, model.get_layer(INPUT_SCALING_LAYER).output)
    return scaling(images).numpy()


@functools.cache
def _saved_application(name: str, shape: tuple[int, ...]) -> tuple[bytes, list[np.ndarray]]:
    """A randomly initialised application's .h5 bytes (no top) and weights, built once per
    module: building one takes a second or more, and every test only reads the file."""
    application = BACKBONES[name].application(include_top=False, weights=None, input_shape=shape)
    with tempfile.TemporaryDirectory() as folder:
        path = pathlib.Path(folder) / "backbone.h5"
        application.save_weights(str(path))
        return path.read_bytes(), application.get_weights()


def _weights_file(name: str, path, shape=SHAPE) -> list[np.ndarray]:
    """Writes a randomly initialised application's weights (no top) as .h5; returns them."""
    contents, weights = _saved_application(name, tuple(shape))
    pathlib.Path(path).write_bytes(contents)
    return weights


def test_backbones_are_the_three_applications_the_issue_names():
    assert NAMES == ["efficientnet_b0", "mobilenet_v2", "resnet50"]


@pytest.mark.parametrize("name", PER_BACKBONE)
def test_input_scaling_gives_the_application_what_its_own_preprocessing_gives(name):
    images = _images()
    model = build_model(name, SHAPE, 5)

    expected = PREPROCESS[name](images * 255.0)

    np.testing.assert_allclose(_scaled(model, images), expected, rtol=1e-5, atol=1e-3)


def test_grey_images_are_scaled_as_the_same_grey_in_three_channels():
    grey = _images((32, 32, 1))
    colour = np.repeat(grey, 3, axis=-1)

    from_grey = _scaled(build_model("resnet50", (32, 32, 1), 5), grey)

    np.testing.assert_allclose(from_grey, PREPROCESS["resnet50"](colour * 255.0), atol=1e-3)


@pytest.mark.parametrize("name", PER_BACKBONE)
def test_backbone_computes_in_bfloat16_and_keeps_float32_weights_and_probabilities(name):
    model = build_model(name, SHAPE, 5, precision="mixed_bfloat16")

    backbone = model.get_layer(BACKBONE_LAYER)
    convs = [layer for layer in backbone.layers if isinstance(layer, tf_keras.layers.Conv2D)]
    assert convs and {layer.compute_dtype for layer in convs} == {"bfloat16"}
    assert backbone.output.dtype == tf.bfloat16
    assert model.get_layer("logits").compute_dtype == "bfloat16"
    # Trained weights and BatchNorm statistics stay float32 (EfficientNet's fixed input
    # Normalization statistics are the application's own bfloat16 exception).
    assert all(weight.dtype == tf.float32 for weight in model.trainable_weights)
    assert all(weight.dtype == tf.float32 for weight in model.weights if "moving" in weight.name)
    assert model.output.dtype == tf.float32
    # The global policy was only set for the build.
    assert tf_keras.mixed_precision.global_policy().name == "float32"
    np.testing.assert_allclose(model(_images()).numpy().sum(axis=1), 1.0, rtol=1e-2)


@pytest.mark.parametrize("name", PER_BACKBONE)
def test_weights_from_a_file_load_into_the_backbone_and_the_head_starts_new(name, tmp_path):
    saved = _weights_file(name, tmp_path / "backbone.h5")
    model = build_model(name, SHAPE, 5)
    head = model.get_layer("logits").get_weights()
    backbone = model.get_layer(BACKBONE_LAYER)
    assert not all(np.array_equal(a, b) for a, b in zip(backbone.get_weights(), saved, strict=True))
    config = TrainerConfig(model=name, pretrained_weights=str(tmp_path / "backbone.h5"))

    loaded = load_pretrained_weights(model, config, SHAPE)

    assert loaded.path == str(tmp_path / "backbone.h5")
    for actual, expected in zip(backbone.get_weights(), saved, strict=True):
        np.testing.assert_array_equal(actual, expected)
    for actual, expected in zip(model.get_layer("logits").get_weights(), head, strict=True):
        np.testing.assert_array_equal(actual, expected)


def test_grey_images_take_the_weights_of_a_colour_backbone(tmp_path):
    saved = _weights_file("mobilenet_v2", tmp_path / "backbone.h5")
    model = build_model("mobilenet_v2", (32, 32, 1), 5)
    config = TrainerConfig(model="mobilenet_v2", pretrained_weights=str(tmp_path / "backbone.h5"))

    load_pretrained_weights(model, config, (32, 32, 1))

    first = model.get_layer(BACKBONE_LAYER).get_weights()[0]
    np.testing.assert_array_equal(first, saved[0])


def test_weights_on_another_filesystem_are_copied_and_loaded(tmp_path):
    saved = _weights_file("mobilenet_v2", tmp_path / "backbone.h5")
    # TensorFlow's in-memory filesystem stands in for gs://: read through tf.io.gfile alike.
    remote = "ram://weights/backbone.h5"
    tf.io.gfile.copy(str(tmp_path / "backbone.h5"), remote, overwrite=True)
    model = build_model("mobilenet_v2", SHAPE, 5)

    load_pretrained_weights(
        model, TrainerConfig(model="mobilenet_v2", pretrained_weights=remote), SHAPE
    )

    np.testing.assert_array_equal(model.get_layer(BACKBONE_LAYER).get_weights()[0], saved[0])


def test_another_backbones_weights_are_refused_naming_the_field_and_file(tmp_path):
    _weights_file("mobilenet_v2", tmp_path / "mobilenet.h5")
    model = build_model("resnet50", SHAPE, 5)
    config = TrainerConfig(model="resnet50", pretrained_weights=str(tmp_path / "mobilenet.h5"))

    with pytest.raises(ConfigError, match=r"trainer.pretrained_weights: .*mobilenet.h5 does not"):
        load_pretrained_weights(model, config, SHAPE)


def _fake_keras_efficientnet_file(path) -> None:
    """An EfficientNetB0 file laid out as Keras's ImageNet one: deviations stored as variances."""
    application = tf_keras.applications.EfficientNetB0(
        include_top=False, weights=None, input_shape=SHAPE
    )
    (normalization,) = [
        layer for layer in application.layers if isinstance(layer, tf_keras.layers.Normalization)
    ]
    normalization.set_weights([np.array([0.485, 0.456, 0.406]), np.array(IMAGENET_STDDEV_RGB), 0])
    application.save_weights(str(path))


@pytest.mark.slow  # builds EfficientNet-B0 three times
def test_keras_imagenet_efficientnet_file_computes_as_tf_keras_own_imagenet_build(
    tmp_path, monkeypatch
):
    path = tmp_path / "efficientnetb0_notop.h5"
    _fake_keras_efficientnet_file(path)
    monkeypatch.setattr(data_utils, "get_file", lambda *args, **kwargs: str(path))
    keras_own = tf_keras.applications.EfficientNetB0(
        include_top=False, weights="imagenet", input_shape=SHAPE
    )
    model = build_model("efficientnet_b0", SHAPE, 5)
    load_pretrained_weights(
        model, TrainerConfig(model="efficientnet_b0", pretrained_weights=str(path)), SHAPE
    )
    pixels = _images() * 255.0  # what our input scaling hands EfficientNet (tested above)

    # The first convolution: deeper, a random backbone's signal fades below any tolerance.
    def stem(backbone):
        return tf_keras.Model(backbone.input, backbone.get_layer("stem_conv").output)(pixels)

    ours, theirs = stem(model.get_layer(BACKBONE_LAYER)), stem(keras_own)
    assert np.abs(theirs).mean() > 0.1
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    ("name", "shape"),
    [(name, SHAPE) for name in NAMES] + [("mobilenet_v2", (96, 96, 3))],
)
def test_imagenet_file_is_the_one_tf_keras_downloads(name, shape, monkeypatch):
    requested = []

    class Requested(Exception):
        pass

    def get_file(fname, origin, **kwargs):
        requested.append((fname, origin, kwargs.get("file_hash")))
        raise Requested

    monkeypatch.setattr(data_utils, "get_file", get_file)
    with pytest.raises(Requested):
        BACKBONES[name].application(include_top=False, weights="imagenet", input_shape=shape)

    weights = BACKBONES[name].imagenet_weights(shape)
    assert requested == [(weights.name, weights.url, weights.file_hash)]


@pytest.fixture
def offline(tmp_path, monkeypatch):
    """No network and an empty Keras cache (a home folder of its own)."""
    (tmp_path / "home" / ".keras").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(imagenet_files, "can_reach", lambda host, *args, **kwargs: False)
    return tmp_path / "home" / ".keras" / "models"


def test_imagenet_without_network_stops_in_one_line_naming_the_file_to_fetch(offline):
    config = TrainerConfig(model="resnet50", pretrained_weights="imagenet")
    weights = BACKBONES["resnet50"].imagenet_weights(SHAPE)

    with pytest.raises(ConfigError) as error:
        require_downloadable_weights(config, SHAPE)

    message = str(error.value)
    assert "\n" not in message
    assert f"curl -o {weights.name} {weights.url}" in message
    assert f"set trainer.pretrained_weights: /path/to/{weights.name}" in message


def test_imagenet_in_the_keras_cache_needs_no_network(offline, tmp_path):
    _weights_file("mobilenet_v2", tmp_path / "file.h5")
    weights = BACKBONES["mobilenet_v2"].imagenet_weights(SHAPE)
    offline.mkdir()
    (tmp_path / "file.h5").rename(offline / weights.name)
    config = TrainerConfig(model="mobilenet_v2", pretrained_weights="imagenet")
    model = build_model("mobilenet_v2", SHAPE, 5)

    require_downloadable_weights(config, SHAPE)
    loaded = load_pretrained_weights(model, config, SHAPE)

    assert loaded.path == str(offline / weights.name)


def _cached_imagenet_file(offline, tmp_path, published_hash) -> tuple[object, str]:
    """MobileNetV2 as if tf_keras published `published_hash` (it publishes none for it), with
    a file of ours in the Keras cache under its name; returns the backbone and the file."""
    name = "mobilenet_v2_test_notop.h5"
    offline.mkdir()
    _weights_file("mobilenet_v2", offline / name)
    url = f"https://storage.googleapis.com/tensorflow/keras-applications/{name}"
    backbone = dataclasses.replace(
        BACKBONES["mobilenet_v2"],
        imagenet_weights=lambda shape: WeightsFile(name, url, published_hash(offline / name)),
    )
    return backbone, str(offline / name)


@pytest.mark.parametrize(
    "digest", [hashlib.md5, hashlib.sha256], ids=["md5-as-tf-keras-publishes", "sha256"]
)
def test_cached_imagenet_file_matching_its_published_hash_loads(offline, tmp_path, digest):
    backbone, cached = _cached_imagenet_file(
        offline, tmp_path, lambda path: digest(path.read_bytes()).hexdigest()
    )
    model = build_model("mobilenet_v2", SHAPE, 5)

    _pretrained.require_imagenet_weights(backbone, SHAPE)
    loaded = _pretrained.load_pretrained_weights(model, backbone, "imagenet", SHAPE)

    assert loaded.path == cached


def test_cached_imagenet_file_failing_its_published_hash_is_refused_in_one_line(offline, tmp_path):
    other = hashlib.md5(b"the bytes Keras published").hexdigest()
    backbone, cached = _cached_imagenet_file(offline, tmp_path, lambda path: other)
    model = build_model("mobilenet_v2", SHAPE, 5)
    before = [w.copy() for w in model.get_layer(BACKBONE_LAYER).get_weights()]

    for check in (
        lambda: _pretrained.require_imagenet_weights(backbone, SHAPE),  # before any component
        lambda: _pretrained.load_pretrained_weights(model, backbone, "imagenet", SHAPE),
    ):
        with pytest.raises(ConfigError) as error:
            check()
        message = str(error.value)
        assert "\n" not in message
        assert f"{cached} does not match the hash tf_keras publishes" in message
        assert f"delete it to download it again, or replace it with curl -o {cached}" in message
    after = model.get_layer(BACKBONE_LAYER).get_weights()
    assert all(np.array_equal(a, b) for a, b in zip(before, after, strict=True))


@pytest.mark.parametrize("where", ["local", "remote"])
def test_a_weights_file_read_is_recorded_by_its_sha256(tmp_path, where):
    _weights_file("mobilenet_v2", tmp_path / "backbone.h5")
    path = str(tmp_path / "backbone.h5")
    if where == "remote":  # TensorFlow's in-memory filesystem stands in for gs://
        tf.io.gfile.copy(path, "ram://weights/sha/backbone.h5", overwrite=True)
        path = "ram://weights/sha/backbone.h5"
    model = build_model("mobilenet_v2", SHAPE, 5)

    loaded = load_pretrained_weights(
        model, TrainerConfig(model="mobilenet_v2", pretrained_weights=path), SHAPE
    )

    expected = hashlib.sha256((tmp_path / "backbone.h5").read_bytes()).hexdigest()
    assert (loaded.path, loaded.sha256) == (path, expected)


def test_reaching_a_host_is_bounded():
    # 192.0.2.0/24 is reserved for documentation: nothing answers there.
    assert imagenet_files.can_reach("192.0.2.1", timeout_s=0.2) is False


def test_pretrained_weights_for_a_model_that_is_no_backbone_names_the_field():
    config = TrainerConfig(model="cnn_bn", pretrained_weights="imagenet")
    with pytest.raises(ConfigError, match=r"trainer.pretrained_weights: model 'cnn_bn' is not a"):
        check_backbone_settings(config, SHAPE)
    user = TrainerConfig(model="tests.components.user_models:small_cnn", pretrained_weights="x.h5")
    with pytest.raises(ConfigError, match=r"trainer.pretrained_weights: model .* is not a"):
        check_backbone_settings(user, SHAPE)


@pytest.mark.parametrize(
    ("shape", "problem"),
    [
        ((28, 28, 1), r"needs images of at least 32x32; dataset.image_shape is \[28, 28, 1\]"),
        ((32, 32, 4), r"takes images of 1 or 3 channels; dataset.image_shape \[32, 32, 4\] has 4"),
    ],
)
def test_images_a_backbone_cannot_take_are_refused_before_any_component(shape, problem):
    with pytest.raises(ConfigError, match=problem):
        check_backbone_settings(TrainerConfig(model="resnet50"), shape)
    with pytest.raises(ConfigError, match=problem):
        build_model("resnet50", shape, 5)


def test_a_local_weights_file_that_is_missing_or_no_h5_is_refused(tmp_path):
    missing = TrainerConfig(model="resnet50", pretrained_weights=str(tmp_path / "nope.h5"))
    with pytest.raises(ConfigError, match=r"trainer.pretrained_weights: no file .*nope.h5"):
        check_backbone_settings(missing, SHAPE)
    (tmp_path / "notes.txt").write_text("not weights")
    text = TrainerConfig(model="resnet50", pretrained_weights=str(tmp_path / "notes.txt"))
    with pytest.raises(ConfigError, match=r"notes.txt is not a Keras .h5 weights file"):
        check_backbone_settings(text, SHAPE)
