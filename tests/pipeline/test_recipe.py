"""Defaults chosen from the data: the chooser on small fake surveys."""

from __future__ import annotations

import pytest

from tpu_pipeline.common.config import load_config
from tpu_pipeline.pipeline.data_tools.data_survey import DataSurvey
from tpu_pipeline.pipeline.wiring.recipe import (
    MIN_STEPS_PER_EPOCH,
    PHOTO_BACKBONE,
    choose_batch,
    choose_epochs,
    choose_recipe,
)

PHOTOS = DataSurvey(train_examples=245, median_short_side=100, sampled=64)
ONLINE = lambda model, shape: True  # noqa: E731
OFFLINE = lambda model, shape: False  # noqa: E731


def _photo_config(**overrides):
    return load_config(None, {"dataset": "signs", **overrides})


def _fields(recipe):
    return {choice.field: choice.value for choice in recipe.choices}


def test_photos_with_imagenet_within_reach_fine_tune_mobilenet_v2_in_two_phases():
    recipe = choose_recipe(_photo_config(), frozenset({"dataset"}), PHOTOS, ONLINE)

    trainer, dataset = recipe.config.trainer, recipe.config.dataset
    assert (trainer.model, trainer.pretrained_weights) == (PHOTO_BACKBONE, "imagenet")
    assert dataset.image_shape == (96, 96, 3)  # Keras's largest ImageNet size within 100 px
    assert 0 < trainer.frozen_backbone_epochs < trainer.epochs
    assert recipe.fallback is None
    assert "trainer.model" in _fields(recipe)


def test_photos_offline_say_in_one_line_what_they_would_use_and_train_from_scratch():
    asked = []

    def offline(model, shape):
        asked.append((model, shape))
        return False

    recipe = choose_recipe(_photo_config(), frozenset({"dataset"}), PHOTOS, offline)

    trainer, dataset = recipe.config.trainer, recipe.config.dataset
    assert asked == [(PHOTO_BACKBONE, (96, 96, 3))]
    assert (trainer.model, trainer.pretrained_weights) == ("resnet20", "none")
    assert trainer.frozen_backbone_epochs == 0
    assert dataset.image_shape == (64, 64, 3)
    assert "\n" not in recipe.fallback
    assert "would fine-tune mobilenet_v2 from ImageNet at 96x96x3" in recipe.fallback
    assert "trains resnet20 from scratch instead" in recipe.fallback
    lines = recipe.lines()
    assert len(lines) == 2 and lines[0] == f"tpu-pipeline: {recipe.fallback}"
    assert "245 training photos, median shorter side 100 px" in lines[1]


def test_batch_fits_the_training_split_and_drops_under_a_tenth_of_it():
    recipe = choose_recipe(_photo_config(), frozenset({"dataset"}), PHOTOS, OFFLINE)

    batch = recipe.config.trainer.per_replica_batch_size
    steps, dropped = divmod(PHOTOS.train_examples, batch)
    assert steps >= MIN_STEPS_PER_EPOCH
    assert dropped < PHOTOS.train_examples / 10
    assert batch == 16


@pytest.mark.parametrize(
    ("count", "batch"), [(245, 16), (2_000, 64), (50_000, 64), (120, 8), (5, 5)]
)
def test_batch_is_a_power_of_two_leaving_ten_steps_where_the_data_allows(count, batch):
    assert choose_batch(count) == batch


def test_epochs_follow_the_dataset_size_and_a_pretrained_backbone_needs_fewer():
    assert choose_epochs(245, pretrained=False) == 30  # capped
    assert choose_epochs(245, pretrained=True) == 12
    assert choose_epochs(1_500, pretrained=False) == 5
    assert choose_epochs(60_000, pretrained=False) == 5  # at least


def test_explicit_settings_always_win():
    overrides = {
        "trainer.model": "cnn_bn",
        "trainer.per_replica_batch_size": 64,
        "trainer.epochs": 3,
        "dataset.image_shape": [48, 48, 3],
    }
    config = _photo_config(**overrides)
    explicit = frozenset({"dataset", "trainer", *overrides})

    def never(model, shape):
        raise AssertionError("a named model needs no ImageNet check")

    recipe = choose_recipe(config, explicit, PHOTOS, never)

    trainer = recipe.config.trainer
    assert (trainer.model, trainer.per_replica_batch_size, trainer.epochs) == ("cnn_bn", 64, 3)
    assert recipe.config.dataset.image_shape == (48, 48, 3)
    assert recipe.choices == [] and recipe.lines() == []


def test_explicit_imagenet_offline_keeps_the_backbone_so_the_run_says_what_to_fetch():
    config = _photo_config(**{"trainer.pretrained_weights": "imagenet"})
    explicit = frozenset({"dataset", "trainer", "trainer.pretrained_weights"})

    recipe = choose_recipe(config, explicit, PHOTOS, OFFLINE)

    assert recipe.config.trainer.model == PHOTO_BACKBONE
    assert recipe.config.trainer.pretrained_weights == "imagenet"
    assert recipe.fallback is None


def test_train_steps_given_leave_the_epochs_alone():
    config = _photo_config(**{"trainer.train_steps": 40})
    explicit = frozenset({"dataset", "trainer", "trainer.train_steps"})

    recipe = choose_recipe(config, explicit, PHOTOS, OFFLINE)

    assert recipe.config.trainer.epochs == config.trainer.epochs
    assert "trainer.epochs" not in _fields(recipe)


def test_pixel_data_without_a_survey_keeps_every_default():
    config = load_config(None, {})  # digits

    recipe = choose_recipe(config, frozenset(), None, OFFLINE)

    assert recipe.config == config and recipe.choices == []


def test_an_image_folder_without_image_shape_gets_its_size_from_the_photos_resized():
    config = load_config(
        None,
        {
            "dataset": {
                "name": "flowers",
                "data_dir": "/data/flowers",
                "format": "image_folder",
                "pixel_feature": "image",
                "label_feature": "label",
                "num_classes": 2,
            }
        },
    )
    small = DataSurvey(train_examples=400, median_short_side=150, sampled=64)

    online = choose_recipe(config, frozenset({"dataset"}), small, ONLINE).config.dataset
    offline = choose_recipe(config, frozenset({"dataset"}), small, OFFLINE).config.dataset

    assert online.image_shape == (128, 128, 3) and online.source.resize
    assert offline.image_shape == (64, 64, 3) and offline.source.resize


def test_the_choices_go_to_the_summary_json_with_their_reasons():
    recipe = choose_recipe(_photo_config(), frozenset({"dataset"}), PHOTOS, OFFLINE)

    recorded = recipe.to_json()

    assert recorded["fallback"] == recipe.fallback
    assert recorded["fields"]["trainer.per_replica_batch_size"] == {
        "value": 16,
        "reason": "15 steps an epoch, 5 of 245 left out of each",
    }
