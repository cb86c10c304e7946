"""The photo recipe with a pretrained backbone within reach, through the CLI, on real photos.

Where MobileNetV2's ImageNet file can be had, `tpu-pipeline run --dataset signs` (the
README's photo example) fine-tunes it in two phases at 96x96. No test machine reaches
the network, so the file is put where tf_keras keeps its downloads (`~/.keras/models/`,
under a HOME of the test's own), as a download would leave it: the recipe sees it
there, and the Trainer loads it from there, as tf_keras's `get_file` would, with no
connection. The file holds a fresh backbone's weights with BatchNorm statistics no fresh
backbone has (the real one is 9 MB that a clone does not ship), so this checks that the
file is loaded, trained in both phases, exported and served, not the accuracy ImageNet
features give. (It also holds what a separate 32x32 MobileNetV2 run once checked: one
MobileNetV2 fine-tune in the suite, not two; and Grad-CAM through the nested backbone.)
"""

from __future__ import annotations

import hashlib
import json
import pathlib

import numpy as np
import pytest
import tf_keras

from tests.pipeline.e2e_helpers import serving_accuracy, split_files
from tpu_pipeline.cli.main import EXIT_OK, main
from tpu_pipeline.common.config import ExplainConfig, load_config
from tpu_pipeline.components import imagenet_files
from tpu_pipeline.components.explain.choice import Chosen
from tpu_pipeline.components.explain.eval_split import explain_images
from tpu_pipeline.components.models._backbone import BACKBONE_LAYER
from tpu_pipeline.components.serving.answers import PixelClassifier, eval_pixels

pytestmark = pytest.mark.slow

SHAPE = (96, 96, 3)  # the size the recipe picks for the shipped photos (median side 100 px)


def _write_backbone_file(path: str) -> dict[str, np.ndarray]:
    """A MobileNetV2 weights file whose BatchNorm statistics must be loaded to be seen."""
    application = tf_keras.applications.MobileNetV2(
        include_top=False, weights=None, input_shape=SHAPE
    )
    rng = np.random.default_rng(0)
    for layer in application.layers:
        if isinstance(layer, tf_keras.layers.BatchNormalization):
            gamma, beta, mean, variance = layer.get_weights()
            layer.set_weights(
                [gamma, beta, rng.normal(0, 0.1, mean.shape), rng.uniform(0.5, 2, variance.shape)]
            )
    application.save_weights(path)
    return {weight.name: weight.numpy() for weight in application.weights}


def test_the_photo_recipe_fine_tunes_the_cached_imagenet_backbone_in_two_phases(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home" / ".keras" / "models").mkdir(parents=True)  # as a first download makes it
    cached = imagenet_files.keras_cache_file(imagenet_files.mobilenet_v2_file(SHAPE))
    assert cached.startswith(str(tmp_path / "home"))
    pretrained = _write_backbone_file(cached)
    summary_path = tmp_path / "summary.json"

    code = main(
        [
            "run", "--dataset", "signs", "--output-dir", str(tmp_path / "out"),
            "--summary-json", str(summary_path), "--set", "trainer.epochs=2",
            "--set", "evaluator.accuracy_lower_bound=0",
            "--set", "serving.tflite_variants=[float32]",
            # XRAI is the photo run's own test (test_photos_e2e): none of its cost here.
            "--set", "explain.mistakes=0", "--set", "explain.correct_per_class=0",
        ]
    )  # fmt: skip

    summary = json.loads(summary_path.read_text())
    assert code == EXIT_OK, summary["error"]
    chosen = summary["chosen_defaults"]
    assert chosen["fallback"] is None
    assert {field: entry["value"] for field, entry in chosen["fields"].items()} == {
        "trainer.model": "mobilenet_v2",
        "trainer.pretrained_weights": "imagenet",
        "dataset.image_shape": list(SHAPE),
        "trainer.per_replica_batch_size": 16,
        "trainer.frozen_backbone_epochs": 1,
    }
    said = capsys.readouterr().err
    assert "model mobilenet_v2 (photos: a pretrained backbone)" in said
    assert "no pretrained backbone within reach" not in said
    trainer = summary["trainer"]
    assert trainer["model"] == "mobilenet_v2" and trainer["epochs"] == 2
    with open(cached, "rb") as file:
        sha256 = hashlib.sha256(file.read()).hexdigest()
    assert trainer["pretrained_weights_sha256"] == sha256
    phases = trainer["fine_tuning"]
    assert [(phase["phase"], phase["epochs"]) for phase in phases] == [
        ("frozen_backbone", [1, 1]),
        ("fine_tune", [2, 2]),
    ]
    assert summary["pushed_model"], summary["push_note"]

    pushed = pathlib.Path(summary["pushed_model"])
    info = json.loads((pushed / "assets.extra" / "training_info.json").read_text())
    assert info["pretrained_weights"] == cached  # the file the recipe found is what was loaded
    assert info["pretrained_weights_sha256"] == sha256
    backbone = tf_keras.models.load_model(pushed, compile=False).get_layer(BACKBONE_LAYER)
    # Loaded, and BatchNorm kept the file's statistics through both phases.
    moving = [w for w in backbone.weights if "moving_" in w.name]
    assert moving and all(np.array_equal(w.numpy(), pretrained[w.name]) for w in moving)
    # The convolutions trained (a random backbone behind frozen BatchNorm saturates its
    # ReLU6s, so its first layers get no gradient: not every kernel moves).
    kernels = [w for w in backbone.weights if w.name.endswith("kernel:0")]
    assert any(not np.array_equal(w.numpy(), pretrained[w.name]) for w in kernels)
    assert (pushed / "tflite" / "float32.tflite").exists()
    config = load_config(None, {"dataset": "signs", "output_dir": str(tmp_path / "out")})
    assert serving_accuracy(pushed, config) == pytest.approx(
        summary["metrics"]["accuracy"], abs=1e-6
    )

    # Grad-CAM through the nested backbone: the export keeps the outer graph's view of the
    # backbone's last feature maps (3x3 at 96 px), and a map comes out at the photo's size.
    classify = PixelClassifier(str(pushed))
    assert classify.grad_cam_layer == BACKBONE_LAYER
    dataset = config.dataset.model_copy(update={"image_shape": SHAPE})
    found = eval_pixels(split_files(config, "eval"), dataset, [0, 1])
    images = [found[0], found[1]]
    kept = classify.feature_map_gradients(np.stack(images[:1]), 0)
    assert kept["feature_maps"].shape == (1, 3, 3, 1280)
    assert kept["gradients"].shape == (1, 3, 3, 1280) and np.abs(kept["gradients"]).max() > 0
    answers = classify(np.stack(images)).numpy()
    chosen = [
        Chosen(index, None, int(answers[index].argmax()), float(answers[index].max()))
        for index in (0, 1)
    ]
    grad_cam = explain_images(classify, images, chosen, dataset, ExplainConfig(method="grad_cam"))
    assert grad_cam.method == "grad_cam" and grad_cam.maps.shape == (2, *SHAPE[:2])
    assert 0 <= grad_cam.maps.min() and grad_cam.maps.max() <= 1
