"""Real photos through the CLI: the shipped hand photos, stored encoded, to a served model.

`tpu-pipeline run --dataset signs`, the README's worked photo example, reads 301 real
JPEGs (one a 3024x3024 phone photo) from the repository, so a plain clone exercises the
whole photo path: the recipe chosen from the photos, ExampleGen keeps
the bytes, StatisticsGen describes the photos' sizes, Transform saves a graph that
decodes them, the Trainer crops them on the host, and every serving signature decodes
them with the same ops.
"""

from __future__ import annotations

import glob
import pathlib

import numpy as np
import pytest
import tensorflow as tf

from tests.conftest import SIGNS_EXPLAINED_MISTAKES, SIGNS_README_COMMAND
from tests.pipeline.e2e_helpers import eval_answers, split_files
from tpu_pipeline.cli.main import EXIT_OK
from tpu_pipeline.common.config import BUILTIN_DATA_DIR
from tpu_pipeline.components.contract import IMAGE_HEIGHT_FEATURE
from tpu_pipeline.components.serving.answers import eval_pixels
from tpu_pipeline.components.serving.export import (
    IMAGES_SIGNATURE,
    SERVING_OUTPUT_KEY,
    SERVING_SIGNATURE,
)
from tpu_pipeline.pipeline.report import write_report
from tpu_pipeline.pipeline.report.collect import collect_report

pytestmark = pytest.mark.slow

PHOTOS = BUILTIN_DATA_DIR / "sign-language-digits"
README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_shows_this_command():
    assert f"{SIGNS_README_COMMAND}\n" in README.read_text()


def test_the_photo_run_takes_the_recipe_chosen_from_the_photos(signs_run):
    code, summary, _ = signs_run

    chosen = summary["chosen_defaults"]
    assert code == EXIT_OK, summary["error"]
    assert {field: entry["value"] for field, entry in chosen["fields"].items()} == {
        "trainer.model": "resnet20",
        "dataset.image_shape": [64, 64, 3],
        "trainer.per_replica_batch_size": 16,
    }
    assert "would fine-tune mobilenet_v2 from ImageNet at 96x96x3" in chosen["fallback"]
    assert summary["trainer"]["global_batch_size"] == 16


def _examples(config, split: str) -> list[tf.train.Example]:
    files = glob.glob(str(config.pipeline_root / "ExampleGen" / "examples" / "*" / split / "*"))
    records = tf.data.TFRecordDataset(files, compression_type="GZIP")
    return [tf.train.Example.FromString(record.numpy()) for record in records]


def test_the_photo_run_succeeds_and_pushes(signs_run):
    code, summary, _ = signs_run

    assert code == EXIT_OK, summary["error"]
    assert summary["pushed_model"] and summary["trainer"]["model"] == "resnet20"
    augmentation = summary["trainer"]["augmentation"]
    assert augmentation["flip"] and augmentation["crop_area"] == [0.25, 1.0]


def test_example_gen_stores_the_photos_bytes_shuffled_into_shards(signs_run):
    _, _, config = signs_run
    sources = {
        path.read_bytes()
        for path in PHOTOS.glob("*/*/*.JPG")
        if path.stat().st_size < 100_000  # the phone photo is stored shrunk, once
    }

    examples = _examples(config, "Split-train") + _examples(config, "Split-eval")

    stored = {example.features.feature["image"].bytes_list.value[0] for example in examples}
    assert len(examples) == 301 and sources <= stored
    heights = {
        example.features.feature[IMAGE_HEIGHT_FEATURE].int64_list.value[0] for example in examples
    }
    assert heights == {100, 512}
    first_labels = [e.features.feature["label"].int64_list.value[0] for e in examples[:30]]
    assert len(set(first_labels)) > 3  # not in folder order


def test_every_signature_classifies_a_photo_the_same_way(signs_run):
    code, summary, config = signs_run
    assert code == EXIT_OK
    model = tf.saved_model.load(summary["pushed_model"])
    example = _examples(config, "Split-eval")[0]
    photo = example.features.feature["image"].bytes_list.value[0]

    from_examples = model.signatures[SERVING_SIGNATURE](
        examples=tf.constant([example.SerializeToString()])
    )[SERVING_OUTPUT_KEY]
    from_bytes = model.signatures[IMAGES_SIGNATURE](images=tf.constant([photo]))[SERVING_OUTPUT_KEY]

    assert from_examples.shape == (1, 10)
    np.testing.assert_allclose(from_examples.numpy(), from_bytes.numpy(), atol=1e-6)


def test_the_report_shows_the_photos_sizes_and_formats(signs_run):
    _, summary, config = signs_run

    report = collect_report(config.run_dir, None, config)

    train = next(split for split in report.data.splits if split.name == "train")
    features = {feature.name: feature for feature in train.features}
    assert features[IMAGE_HEIGHT_FEATURE].maximum == 512
    assert features["image_format"].values == [("jpeg", 241)]
    assert pathlib.Path(summary["pushed_model"]).is_dir()


def test_the_summary_slices_the_eval_photos_by_class_format_and_stored_size(signs_run):
    code, summary, config = signs_run
    assert code == EXIT_OK, summary["error"]
    examples = _examples(config, "Split-eval")
    probabilities, labels = eval_answers(summary["pushed_model"], config)
    right = probabilities.argmax(axis=1) == labels
    longer = np.array(
        [
            max(
                e.features.feature[name].int64_list.value[0]
                for name in ("image_height", "image_width")
            )
            for e in examples
        ]
    )
    expected = {("class", name): labels == c for c, name in enumerate(config.dataset.class_names)}
    expected[("image_format", "jpeg")] = np.ones(len(examples), bool)  # every photo is a JPEG
    expected[("image_size", "65-128 px")] = (longer > 64) & (longer <= 128)
    expected[("image_size", "257-512 px")] = (longer > 256) & (longer <= 512)
    found = {(s["kind"], s["value"]): s for s in summary["slices"]}
    assert found.keys() == {key for key, mask in expected.items() if mask.any()}
    for key, slice_ in found.items():
        mask = expected[key]
        assert slice_["examples"] == mask.sum(), key
        assert slice_["accuracy"] == pytest.approx(right[mask].mean(), abs=1e-6), key


def test_the_report_explains_the_surest_mistakes_with_xrai_on_the_served_model(signs_run, tmp_path):
    code, _, config = signs_run
    assert code == 0
    report = collect_report(config.run_dir, None, config)
    explained = report.attributions
    assert explained.method == "xrai"  # photos: regions, not scattered pixels
    assert explained.settings["baselines"] == ["black", "white"]
    assert [c.mistake for c in explained.chosen] == [True] * SIGNS_EXPLAINED_MISTAKES
    probabilities = [c.probability for c in explained.chosen]
    assert probabilities == sorted(probabilities, reverse=True)
    assert explained.maps.shape == (SIGNS_EXPLAINED_MISTAKES, *config.dataset.image_shape[:2])
    assert explained.maps.min() >= 0 and explained.maps.max() == pytest.approx(1.0, abs=1e-3)
    # Regions are ranked: a map of one photo holds several levels, not a per-pixel noise.
    assert 2 <= len(np.unique(explained.maps[0])) <= 64
    # The answers recorded are the served model's, on the same eval photos.
    indices = [c.index for c in explained.chosen]
    found = eval_pixels(split_files(config, "eval"), config.dataset, indices)
    served = tf.saved_model.load(report.summary.pushed_model)
    pixels = tf.constant(np.stack([found[i] for i in indices]))
    answers = served.signatures["pixels"](pixels=pixels)["probabilities"].numpy()
    assert list(answers.argmax(axis=1)) == [c.predicted for c in explained.chosen]
    np.testing.assert_allclose(answers.max(axis=1), probabilities, atol=1e-5)
    html = write_report(config.run_dir, output_dir=tmp_path / "explained-report")
    assert "XRAI maps of what drove" in html.html.read_text(encoding="utf-8")
