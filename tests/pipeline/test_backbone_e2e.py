"""A pretrained backbone end to end: weights from a file, two phases, served with its scaling."""

from __future__ import annotations

import hashlib
import io
import json
import pathlib

import numpy as np
import pytest
import tf_keras

from cli.synthetic_data import write_synthetic
from common.config import load_config
from components.models._backbone import BACKBONE_LAYER
from pipeline.local_runner import run_local
from tests.pipeline.e2e_helpers import serving_accuracy

pytestmark = pytest.mark.slow


def test_mobilenet_fine_tuned_from_a_weights_file_is_trained_exported_and_served(tmp_path):
    data_dir = write_synthetic(tmp_path / "raw", "npz", 400, "cifar10", 80, seed=5)
    weights = tmp_path / "mobilenet_v2_notop.h5"
    application = tf_keras.applications.MobileNetV2(
        include_top=False, weights=None, input_shape=(32, 32, 3)
    )
    rng = np.random.default_rng(0)
    for layer in application.layers:  # statistics no fresh backbone has: they must be loaded
        if isinstance(layer, tf_keras.layers.BatchNormalization):
            gamma, beta, mean, variance = layer.get_weights()
            layer.set_weights(
                [gamma, beta, rng.normal(0, 0.1, mean.shape), rng.uniform(0.5, 2, variance.shape)]
            )
    application.save_weights(str(weights))
    pretrained = {w.name: w.numpy() for w in application.weights}
    overrides = {
        "output_dir": str(tmp_path / "out"),
        "dataset": {
            "name": "colour-32",
            "data_dir": str(data_dir),
            "format": "npz",
            "image_shape": [32, 32, 3],
            "pixel_feature": "pixels",
            "label_feature": "label",
            "num_classes": 10,
        },
        "trainer.model": "mobilenet_v2",
        "trainer.pretrained_weights": str(weights),
        "trainer.frozen_backbone_epochs": 1,
        "trainer.epochs": 2,
        "trainer.train_steps": 10,
        "trainer.per_replica_batch_size": 16,
        "serving.tflite_variants": ["float32"],
        "evaluator.accuracy_lower_bound": 0.0,
    }
    # The first run bootstraps the new dataset's schema there and trains on.
    config = load_config(None, {**overrides, "dataset.schema_file": str(tmp_path / "schema.pbtxt")})

    summary = run_local(config, io.StringIO())

    assert summary.succeeded and summary.pushed_model, summary.error
    pushed = pathlib.Path(summary.pushed_model)
    info = json.loads((pushed / "assets.extra" / "training_info.json").read_text())
    assert info["pretrained_weights"] == str(weights)
    assert info["pretrained_weights_sha256"] == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert summary.trainer["pretrained_weights_sha256"] == info["pretrained_weights_sha256"]
    assert [phase["phase"] for phase in info["fine_tuning"]] == ["frozen_backbone", "fine_tune"]
    served = tf_keras.models.load_model(pushed, compile=False)
    backbone = served.get_layer(BACKBONE_LAYER)
    # Loaded, and BatchNorm kept the file's statistics through both phases.
    moving = [w for w in backbone.weights if "moving_" in w.name]
    assert moving and all(np.array_equal(w.numpy(), pretrained[w.name]) for w in moving)
    # The convolutions trained (a random backbone behind frozen BatchNorm saturates its
    # ReLU6s, so its first layers get no gradient: not every kernel moves).
    kernels = [w for w in backbone.weights if w.name.endswith("kernel:0")]
    assert any(not np.array_equal(w.numpy(), pretrained[w.name]) for w in kernels)
    assert (pushed / "tflite" / "float32.tflite").exists()
    assert serving_accuracy(summary.pushed_model, config) == pytest.approx(
        summary.metrics["accuracy"], abs=1e-6
    )
