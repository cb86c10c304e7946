"""The photo recipe with a pretrained backbone within reach, through the CLI, on real photos.

Where MobileNetV2's ImageNet file can be had, `tpu-pipeline run --dataset signs` (the
README's photo example) fine-tunes it in two phases at 96x96. No test machine reaches
the network, so the file is put where tf_keras keeps its downloads (`~/.keras/models/`,
under a HOME of the test's own), as a download would leave it: the recipe sees it
there, and the Trainer loads it from there, as tf_keras's `get_file` would, with no
connection. The file holds a fresh backbone's weights (the real one is 9 MB that a clone
does not ship), so this checks the path, not the accuracy ImageNet features give.
"""

from __future__ import annotations

import hashlib
import json

import pytest
import tf_keras

from cli.main import EXIT_OK, main
from components import imagenet_files

pytestmark = pytest.mark.slow

SHAPE = (96, 96, 3)  # the size the recipe picks for the shipped photos (median side 100 px)


def test_the_photo_recipe_fine_tunes_the_cached_imagenet_backbone_in_two_phases(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home" / ".keras" / "models").mkdir(parents=True)  # as a first download makes it
    cached = imagenet_files.keras_cache_file(imagenet_files.mobilenet_v2_file(SHAPE))
    assert cached.startswith(str(tmp_path / "home"))
    tf_keras.applications.MobileNetV2(
        include_top=False, weights=None, input_shape=SHAPE
    ).save_weights(cached)
    summary_path = tmp_path / "summary.json"

    code = main(
        [
            "run", "--dataset", "signs", "--output-dir", str(tmp_path / "out"),
            "--summary-json", str(summary_path), "--set", "trainer.epochs=3",
            "--set", "evaluator.accuracy_lower_bound=0",
            "--set", "serving.tflite_variants=[float32]",
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
    assert trainer["model"] == "mobilenet_v2" and trainer["epochs"] == 3
    with open(cached, "rb") as file:
        assert trainer["pretrained_weights_sha256"] == hashlib.sha256(file.read()).hexdigest()
    assert [phase["phase"] for phase in trainer["fine_tuning"]] == ["frozen_backbone", "fine_tune"]
    assert summary["pushed_model"], summary["push_note"]
