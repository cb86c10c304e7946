"""Defaults chosen from the data: the chooser on small fake surveys."""

from __future__ import annotations

import pytest

from tpu_pipeline.common.config import load_config
from tpu_pipeline.pipeline.data_tools.data_survey import DataSurvey
from tpu_pipeline.pipeline.wiring.recipe import (
    AFTER_WORK_INFERENCE_IMAGES,
    EPOCH_RATE_SHARE,
    MIN_STEPS_PER_EPOCH,
    OVERHEAD_SECONDS,
    OVERHEAD_SECONDS_PER_PHOTO,
    PHOTO_BACKBONE,
    choose_batch,
    choose_epochs,
    choose_recipe,
    plan_budget,
)

PHOTOS = DataSurvey(train_examples=245, median_short_side=100, sampled=64)
ONLINE = lambda model, shape: True  # noqa: E731
OFFLINE = lambda model, shape: False  # noqa: E731


CIFAR_LIKE = DataSurvey(
    train_examples=45_000, median_short_side=32, sampled=64, eval_examples=5_000
)


class Probe:
    """Stands in for the training-rate probe: fixed rates, and a record of what it timed.

    The float32 forward pass runs at twice the training rate unless given.
    """

    def __init__(self, images_per_second: float, inference: float | None = None):
        self.images_per_second = images_per_second
        self.float32_inference_images_per_second = inference or 2 * images_per_second
        self.asked = []

    def __call__(self, model, image_shape, num_classes, batch):
        self.asked.append((model, image_shape, num_classes, batch))
        return self

    training_flops = 700_000_000
    precision = "mixed_bfloat16"


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


def test_thousands_of_cifar_sized_photos_train_fast_cnn_for_what_the_budget_buys():
    probe = Probe(images_per_second=1_000)

    recipe = choose_recipe(_photo_config(), frozenset({"dataset"}), CIFAR_LIKE, ONLINE, probe)

    trainer, dataset = recipe.config.trainer, recipe.config.dataset
    assert probe.asked == [("fast_cnn", (32, 32, 3), 10, 1024)]
    assert (trainer.model, trainer.pretrained_weights, dataset.image_shape) == (
        "fast_cnn",
        "none",
        (32, 32, 3),
    )
    # Time to spare: the recipe's ~500,000 examples seen (10 epochs of CIFAR-10's 50,000).
    assert trainer.epochs == 11 and trainer.warmup_epochs == pytest.approx(0.23 * 11)
    assert trainer.per_replica_batch_size == 1024  # 473 steps: the recipe's own batch
    assert (trainer.optimizer, trainer.label_smoothing, trainer.weight_averaging) == (
        "sgd",
        0.2,
        "lookahead",
    )
    assert trainer.random_crop_area == (1.0, 1.0) and trainer.test_time_flip
    budget = recipe.lines()[-1]
    assert "fast_cnn at 1,000 images/s in mixed_bfloat16" in budget
    assert "answers 2,000 images/s in float32" in budget  # the work after training's rate
    assert "11 epochs: about 0.90 on CIFAR-10" in budget and "in all" in budget
    assert recipe.to_json()["budget"]["epochs"] == 11
    assert recipe.to_json()["budget"]["float32_images_per_second"] == 2_000


def test_a_shorter_budget_plans_fewer_epochs_with_the_same_warmup_share():
    probe = Probe(images_per_second=250, inference=600)
    config = _photo_config(**{"trainer.time_budget_minutes": 15})

    recipe = choose_recipe(config, frozenset({"dataset", "trainer"}), CIFAR_LIKE, ONLINE, probe)

    trainer, plan = recipe.config.trainer, recipe.budget
    assert 1 <= trainer.epochs < 11 and trainer.epochs == plan.epochs
    assert trainer.warmup_epochs == pytest.approx(0.23 * trainer.epochs)
    assert plan.run_minutes <= 15 and plan.budget_minutes == 15
    # Few epochs: smaller batches, so the run still takes a few hundred steps.
    assert trainer.per_replica_batch_size == 256
    assert f"{trainer.epochs} epochs (the budget's share of 11)" in recipe.lines()[-1]
    # Fewer examples seen than the measured 0.90 run: the lower class, not its words.
    assert "about 0.90" not in recipe.lines()[-1]
    assert "0.80 on CIFAR-10" in recipe.lines()[-1]


def test_the_plan_fits_epochs_and_validation_beside_the_rest_of_the_run():
    rate = Probe(images_per_second=100, inference=400)
    plan = plan_budget("fast_cnn", 9_000, 3_000, 60, target_epochs=50, rate=rate)

    epoch_seconds = (9_000 + 3_000 / 3) / (100 * EPOCH_RATE_SHARE)
    overhead = (
        OVERHEAD_SECONDS + OVERHEAD_SECONDS_PER_PHOTO * 12_000 + AFTER_WORK_INFERENCE_IMAGES / 400
    )
    assert plan.epochs == int((60 * 60 - overhead) // epoch_seconds)
    assert plan.run_minutes == pytest.approx((plan.epochs * epoch_seconds + overhead) / 60, abs=0.1)
    too_short = plan_budget("fast_cnn", 9_000, 3_000, 1, 50, rate)
    assert too_short.epochs == 1 and too_short.run_minutes > 1  # at least one epoch
    assert "; 1 epoch" in too_short.describe() and "1 epochs" not in too_short.describe()
    assert too_short.describe().endswith("(over the budget: one epoch is the least a run trains)")
    assert "over the budget" not in plan.describe()


def test_the_work_after_training_is_planned_at_the_float32_rate_not_the_training_rate():
    # A CPU with bfloat16 units trains 2-3x faster than it runs the float32 after-work:
    # the same training rate with a slower forward pass leaves time for fewer epochs.
    def epochs(inference: float) -> int:
        rate = Probe(images_per_second=800, inference=inference)
        return plan_budget("fast_cnn", 45_000, 5_000, 15, target_epochs=11, rate=rate).epochs

    assert epochs(inference=4_000) == 11
    assert epochs(inference=1_000) == 9
    assert epochs(inference=500) < 9


def test_thousands_of_larger_photos_from_scratch_get_more_than_five_epochs_if_time_allows():
    probe = Probe(images_per_second=2_000)
    survey = DataSurvey(train_examples=3_000, median_short_side=80, sampled=64, eval_examples=300)

    recipe = choose_recipe(_photo_config(), frozenset({"dataset"}), survey, OFFLINE, probe)

    assert recipe.config.trainer.model == "resnet20"
    assert recipe.config.trainer.epochs == 30 > choose_epochs(3_000, pretrained=False)
    assert probe.asked == [("resnet20", (64, 64, 3), 10, 64)]


def test_a_few_hundred_photos_keep_the_examples_seen_rule_without_a_probe():
    probe = Probe(images_per_second=1_000)

    recipe = choose_recipe(_photo_config(), frozenset({"dataset"}), PHOTOS, OFFLINE, probe)

    assert probe.asked == [] and recipe.budget is None
    assert recipe.config.trainer.model == "resnet20"
    assert recipe.config.trainer.epochs == choose_epochs(PHOTOS.train_examples, pretrained=False)


def test_fields_the_user_set_win_over_the_model_recipe_and_set_epochs_need_no_probe():
    probe = Probe(images_per_second=1_000)
    overrides = {"trainer.label_smoothing": 0.0, "trainer.epochs": 3, "trainer.optimizer": "adam"}
    config = _photo_config(**overrides)
    explicit = frozenset({"dataset", "trainer", *overrides})

    recipe = choose_recipe(config, explicit, CIFAR_LIKE, ONLINE, probe)

    trainer = recipe.config.trainer
    assert probe.asked == [] and trainer.model == "fast_cnn"
    assert (trainer.label_smoothing, trainer.epochs, trainer.optimizer) == (0.0, 3, "adam")
    assert trainer.weight_averaging == "lookahead"  # unset: the recipe's
    assert trainer.warmup_epochs == pytest.approx(0.69)  # its share of the 3 epochs set


def test_a_named_fast_cnn_on_pixel_data_gets_its_recipe_but_digits_keep_their_handedness():
    config = load_config(None, {"trainer.model": "fast_cnn"})  # digits: pixel values

    recipe = choose_recipe(config, frozenset({"trainer", "trainer.model"}), None, OFFLINE)

    trainer = recipe.config.trainer
    assert (trainer.optimizer, trainer.epochs, trainer.per_replica_batch_size) == ("sgd", 10, 1024)
    assert recipe.config.dataset.name == "digits"
    assert trainer.label_smoothing == 0.2 and trainer.weight_averaging == "lookahead"
    assert trainer.random_crop_area is None
    assert trainer.random_flip is None and not trainer.test_time_flip  # no mirror images


def test_fewer_photos_than_cifar_10_see_as_many_examples_in_more_epochs():
    survey = DataSurvey(train_examples=10_000, median_short_side=32, sampled=64, eval_examples=500)

    recipe = choose_recipe(_photo_config(), frozenset({"dataset"}), survey, ONLINE, Probe(1e6))

    assert recipe.config.trainer.model == "fast_cnn"
    assert recipe.config.trainer.epochs == 50  # 500,000 examples seen
    assert recipe.config.trainer.per_replica_batch_size == 512  # 19 steps an epoch
