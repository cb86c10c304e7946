"""Defaults that follow the data and a time budget, for every recipe field the user left unset.

A small folder of photos is what transfer learning is for: with a pretrained backbone
within reach (its ImageNet file in Keras's cache or downloadable now), photos train
MobileNetV2 from ImageNet weights in two phases (the head alone, then the whole
model), at the largest size Keras has ImageNet weights for that the photos cover.
Without one, they train ResNet-20 from scratch at up to 64x64, which learns on a CPU
in minutes (0.75-0.87 on the shipped hand photos, README "Photos"), and the run
says in one line what it would have used. The batch is at most a tenth of the
training split, so an epoch has at least ten steps and the last partial batch drops
under a tenth of it; the epochs give the model about a fixed number of examples to
see.

Thousands of photos trained from scratch are planned by compute instead
(`plan_budget`): a few timed training steps of the chosen model measure this
machine's rate, and the epochs are as many as fit in `trainer.time_budget_minutes`
(45 by default) beside the rest of the run, up to the model's own target. Photos of
CIFAR-10's size (at most FAST_MAX_SIDE px) train `fast_cnn` with its recipe (the
airbench94 recipe; 11 epochs measured 0.90 on CIFAR-10 here); larger ones ResNet-20, up
to SCRATCH_TARGET_EPOCHS. The run's first lines say the rate, the epochs, the
accuracy class they buy and the time planned. A model that brings its own training
recipe (`tpu_pipeline.common.config.MODEL_RECIPES`) gets it for every field left unset,
whatever chose the model. A field the user set (file, flag or --set) always wins.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

from tpu_pipeline.common.config import MODEL_RECIPES, PHOTO_DEFAULT_MODEL, PipelineConfig
from tpu_pipeline.components.imagenet_files import IMAGENET_FILES, MOBILENET_V2_SIZES
from tpu_pipeline.pipeline.data_tools.data_survey import DataSurvey

# Measures the training rate of (model, image_shape, num_classes, batch) here, in the
# precision the Trainer will use (`components.training.probe.probe_training_rate`, which
# answers a `TrainingRate`); a stand-in in tests.
RateProbe = Callable[[str, tuple[int, int, int], int, int], Any]

PHOTO_BACKBONE = "mobilenet_v2"
# From scratch, larger photos only cost time on a CPU: 64x64 keeps an epoch of a few
# hundred photos to seconds; below 32 the CNNs' strided stages run out of pixels.
SCRATCH_SIDES = (32, 64)
BATCH_RANGE = (8, 64)
MIN_STEPS_PER_EPOCH = 10
# Examples the model sees over the whole run: a pretrained backbone needs fewer.
EXAMPLES_TO_SEE = {"scratch": 7_500, "fine_tune": 3_000}
EPOCH_RANGE = (5, 30)
# The share of the epochs that train the new head alone, the backbone frozen.
FROZEN_SHARE = 1 / 3

# From this many training photos on, the epochs come from a time budget (`plan_budget`);
# fewer keep the examples-seen rule above, which is seconds to minutes anyway.
BUDGETED_MIN_PHOTOS = 2_000
DEFAULT_TIME_BUDGET_MINUTES = 45.0
# Photos no larger than this (median shorter side, px) are CIFAR-10-class: fast_cnn at 32x32.
FAST_MODEL = "fast_cnn"
FAST_MAX_SIDE = 40
# A model recipe's fields that only photos get: mirror images, and crops.
PHOTO_ONLY_FIELDS = ("random_flip", "test_time_flip", "random_crop_area")
# Models without a recipe of their own, from scratch: epochs up to this as the budget allows.
SCRATCH_TARGET_EPOCHS = 30
# A model recipe's epochs are for CIFAR-10's 50,000 images: a smaller set gets more epochs
# so the model sees as many examples (airbench94: ~500,000), up to this many.
RECIPE_DATA_SIZE = 50_000
RECIPE_MAX_EPOCHS = 50
# ...and a shorter run than the recipe's keeps about its number of steps (airbench94: ~490
# steps of 1024) with a smaller batch, down to this one.
RECIPE_MIN_STEPS = 400
RECIPE_MIN_BATCH = 256
# The run's work besides training epochs, measured on 50,000 CIFAR-10 JPEGs here on a
# quiet machine (docs/benchmarks.md, "CIFAR-10"): start-up and the report (fixed);
# ExampleGen, statistics and Transform (per photo: ExampleGen alone 1.2 ms); and the work
# after training that runs the model (the Trainer's export, the ServingPackager's four
# TFLite variants measured on 2,000 images, the Evaluator, attributions), counted as
# images of the model's float32 forward pass at the probed rate: it runs in float32
# whatever the training precision. On an Intel Xeon with AMX (fast_cnn with test-time
# flips) it took 190 s at 1,080 float32 images/s while training ran at 755 bfloat16
# images/s; counted at the training rate (70,000 images), a 15-minute plan took 16.5.
# The first two were 200 s and 3 ms until a 15-minute run planned 14 minutes and took
# 10: they planned 5.8 minutes for work that took 1.9.
OVERHEAD_SECONDS = 40.0
OVERHEAD_SECONDS_PER_PHOTO = 0.0017
AFTER_WORK_INFERENCE_IMAGES = 200_000
# What the Trainer's epochs reach of the probe's rate. The probe times `fit`'s steps on
# one batch held in memory; the epochs add the input pipeline (~1 % of a step here) and
# their start: on the Intel Xeon the probe read 771-780 images/s (three probes) and
# fast_cnn's epochs, validation apart, 0.93 of that. (The probe timed `train_on_batch`
# until 2026-12-06, whose per-call set-up made it 25-40 % slower than the epochs.)
EPOCH_RATE_SHARE = 0.93
# Validation after every epoch classifies the eval split: one forward pass, a third of
# a training step per image.
EVAL_COST_SHARE = 1 / 3
# What fast_cnn bought here on CIFAR-10-class data (10 classes of 32x32 photos) by
# examples seen in training, as measured (docs/benchmarks.md, "CIFAR-10 from JPEG
# folders"): (at least this many examples seen, in words). airbench94 reports 0.94 at
# ~500,000 seen; this implementation measured 0.900 there, so the words are ours. The
# 8-epoch point was measured with airbench's BatchNorm momentum, mirrored borders and
# alternating flips (2026-12-06), the others before them.
ACCURACY_CLASSES = {
    FAST_MODEL: (
        (480_000, "about 0.90 on CIFAR-10 (0.900 measured at 11 epochs)"),
        (400_000, "about 0.89 on CIFAR-10 (0.892 measured at 9 epochs)"),
        (360_000, "about 0.89 on CIFAR-10 (0.890 measured at 8 epochs)"),
        (220_000, "about 0.87 on CIFAR-10 (0.875 measured at 5 epochs)"),
        (130_000, "about 0.85 on CIFAR-10 (0.852 measured at 3 epochs)"),
        (80_000, "about 0.80 on CIFAR-10 (0.797 measured)"),
        (0, "below 0.80 on CIFAR-10"),
    ),
}


@dataclasses.dataclass(frozen=True)
class Choice:
    """One field the data decided: its dotted name, the value and why, in a few words."""

    field: str
    value: Any
    reason: str


@dataclasses.dataclass
class Recipe:
    """The configuration with the chosen defaults in, and what was chosen.

    Attributes:
      config: the configuration to run.
      choices: the fields chosen from the data, in the order they were decided.
      fallback: the one line saying what a pretrained backbone would have been and
        what trains instead, when none is within reach; None otherwise.
      survey: what the data survey found (None: no survey of this format).
      budget: the time budget's plan (rate, epochs, what they buy, time), when the
        epochs came from one; None otherwise.
    """

    config: PipelineConfig
    choices: list[Choice]
    fallback: str | None
    survey: DataSurvey | None
    budget: BudgetPlan | None = None

    def lines(self) -> list[str]:
        """What the run prints before its first component: at most three lines."""
        lines = [f"tpu-pipeline: {self.fallback}"] if self.fallback else []
        if self.choices:
            found = ""
            if self.survey is not None:
                side = self.survey.median_short_side
                found = f" ({self.survey.train_examples} training photos" + (
                    f", median shorter side {side} px)" if side else ")"
                )
            # A model's own recipe is many fields: one phrase names it, the JSON lists them.
            own = [c for c in self.choices if c.reason.endswith("'s recipe")]
            chosen = [
                f"{c.field.rpartition('.')[2]} {_shown(c.value)} ({c.reason})"
                for c in self.choices
                if c not in own
            ]
            if own:
                chosen.append(f"{len(own)} more from {own[0].reason} (--save-config lists them)")
            lines.append(
                f"tpu-pipeline: chosen from the data{found}: {'; '.join(chosen)}; set a field "
                "to choose it yourself"
            )
        if self.budget is not None:
            lines.append(f"tpu-pipeline: {self.budget.describe()}")
        return lines

    def to_json(self) -> dict[str, Any]:
        """For the summary JSON: each chosen field's value and reason, the fallback and the
        budget's plan."""
        return {
            "fields": {c.field: {"value": c.value, "reason": c.reason} for c in self.choices},
            "fallback": self.fallback,
            "budget": dataclasses.asdict(self.budget) if self.budget else None,
        }


@dataclasses.dataclass(frozen=True)
class BudgetPlan:
    """The epochs a time budget allows one model here, and what they buy.

    Attributes:
      model: the model planned for.
      budget_minutes: the whole run's budget.
      images_per_second: the probe's training rate here.
      precision: the precision it was measured (and will train) in.
      training_flops: FLOPs of one training image.
      float32_images_per_second: the probe's float32 forward rate here, which the work
        after training is planned at.
      epochs: the epochs planned: the model's target, or fewer if the budget is short.
      target_epochs: what the model aims at with time to spare.
      training_minutes: the epochs' expected time (validation included).
      run_minutes: the whole run's expected time.
      accuracy_class: what the epochs buy, in words (None: no figures for this model).
    """

    model: str
    budget_minutes: float
    images_per_second: float
    precision: str
    training_flops: int
    float32_images_per_second: float
    epochs: int
    target_epochs: int
    training_minutes: float
    run_minutes: float
    accuracy_class: str | None

    def describe(self) -> str:
        """One line: the rate here, the epochs and their compute, what they buy, how long."""
        flops = self.images_per_second * self.training_flops
        short = (
            f" (the budget's share of {self.target_epochs})"
            if self.epochs < self.target_epochs
            else ""
        )
        buys = f": {self.accuracy_class}" if self.accuracy_class else ""
        epochs = f"{self.epochs} epoch" + ("s" if self.epochs != 1 else "")
        over = self.run_minutes > self.budget_minutes
        return (
            f"time budget {self.budget_minutes:g} min: this machine trains {self.model} at "
            f"{self.images_per_second:,.0f} images/s in {self.precision} "
            f"({self.training_flops / 1e9:.2f} GFLOP each, {flops / 1e9:,.0f} GFLOP/s) and "
            f"answers {self.float32_images_per_second:,.0f} images/s in float32; "
            f"{epochs}{short}{buys}; planned ~{self.training_minutes:.0f} min of "
            f"training, ~{self.run_minutes:.0f} min in all"
            + (" (over the budget: one epoch is the least a run trains)" if over else "")
        )


def _shown(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        return "x".join(str(v) for v in value)
    return str(value)


def _power_of_two_at_most(value: float) -> int:
    return 2 ** max(0, math.floor(math.log2(max(1.0, value))))


def choose_batch(train_examples: int, largest: int = BATCH_RANGE[1]) -> int:
    """The largest power of two in BATCH_RANGE (up to `largest`, a model's own batch) giving
    at least MIN_STEPS_PER_EPOCH steps."""
    low, high = BATCH_RANGE[0], largest
    fitting = _power_of_two_at_most(train_examples / MIN_STEPS_PER_EPOCH)
    return max(min(low, train_examples), min(high, fitting))


def recipe_batch(batch: int, train_examples: int, epochs: int) -> int:
    """A model recipe's batch, halved (down to RECIPE_MIN_BATCH) until the run has at least
    RECIPE_MIN_STEPS steps: with few epochs, more and smaller steps learn more from the same
    images (docs/benchmarks.md, "CIFAR-10"), at about the same cost per image on a CPU."""
    while batch // 2 >= RECIPE_MIN_BATCH and epochs * (train_examples // batch) < RECIPE_MIN_STEPS:
        batch //= 2
    return batch


def recipe_target_epochs(recipe_epochs: int | None, train_examples: int) -> int | None:
    """A model recipe's epochs (for RECIPE_DATA_SIZE images) for `train_examples` images:
    as many examples seen, never fewer epochs, at most RECIPE_MAX_EPOCHS."""
    if not recipe_epochs:
        return None
    scaled = round(recipe_epochs * RECIPE_DATA_SIZE / max(1, train_examples))
    return max(recipe_epochs, min(RECIPE_MAX_EPOCHS, scaled))


def accuracy_class(model: str, examples_seen: int) -> str | None:
    """What training `model` on `examples_seen` examples buys on the data its figures are
    for, or None (no figures for this model)."""
    for at_least, words in ACCURACY_CLASSES.get(model, ()):
        if examples_seen >= at_least:
            return words
    return None


def plan_budget(
    model: str,
    train_examples: int,
    eval_examples: int,
    budget_minutes: float,
    target_epochs: int,
    rate: Any,
) -> BudgetPlan:
    """The epochs of `model` that fit in `budget_minutes` here, at most `target_epochs`.

    Args:
      model: the model to train.
      train_examples, eval_examples: the splits' sizes (validation runs every epoch).
      budget_minutes: the whole run's wall time to plan within.
      target_epochs: the epochs the model aims at when time allows.
      rate: the probe's measurement (`tpu_pipeline.components.training.probe.TrainingRate`).
    """
    per_second = rate.images_per_second * EPOCH_RATE_SHARE
    epoch_seconds = (train_examples + eval_examples * EVAL_COST_SHARE) / per_second
    overhead = (
        OVERHEAD_SECONDS
        + OVERHEAD_SECONDS_PER_PHOTO * (train_examples + eval_examples)
        + AFTER_WORK_INFERENCE_IMAGES / rate.float32_inference_images_per_second
    )
    fitting = math.floor((budget_minutes * 60 - overhead) / epoch_seconds)
    epochs = max(1, min(target_epochs, fitting))
    training = epochs * epoch_seconds
    return BudgetPlan(
        model=model,
        budget_minutes=budget_minutes,
        images_per_second=round(rate.images_per_second, 1),
        precision=rate.precision,
        training_flops=rate.training_flops,
        float32_images_per_second=round(rate.float32_inference_images_per_second, 1),
        epochs=epochs,
        target_epochs=target_epochs,
        training_minutes=round(training / 60, 1),
        run_minutes=round((training + overhead) / 60, 1),
        accuracy_class=accuracy_class(model, epochs * train_examples),
    )


def choose_epochs(train_examples: int, pretrained: bool) -> int:
    """Enough epochs to see EXAMPLES_TO_SEE examples, within EPOCH_RANGE."""
    budget = EXAMPLES_TO_SEE["fine_tune" if pretrained else "scratch"]
    low, high = EPOCH_RANGE
    return max(low, min(high, round(budget / max(1, train_examples))))


def backbone_side(median_short_side: int | None) -> int:
    """The largest size Keras has MobileNetV2 ImageNet weights for that the photos cover."""
    if median_short_side is None:
        return MOBILENET_V2_SIZES[-1]
    fitting = [size for size in MOBILENET_V2_SIZES if size <= median_short_side]
    return fitting[-1] if fitting else MOBILENET_V2_SIZES[0]


def scratch_side(median_short_side: int | None) -> int:
    """Up to 64 px, a multiple of 8 the photos cover, at least 32."""
    low, high = SCRATCH_SIDES
    if median_short_side is None:
        return high
    return max(low, min(high, median_short_side // 8 * 8))


def choose_recipe(
    config: PipelineConfig,
    explicit: frozenset[str],
    survey: DataSurvey | None,
    imagenet_available: Callable[[str, tuple[int, int, int]], bool],
    measure_rate: RateProbe | None = None,
) -> Recipe:
    """Fills in the recipe fields the user left unset from the data and the time budget.

    Args:
      config: the configuration as loaded.
      explicit: the dotted fields the user set (`tpu_pipeline.common.config.explicit_fields`).
      survey: the photo folder's survey, or None (not an image folder).
      imagenet_available: whether a backbone's ImageNet file for an image shape is
        cached or downloadable now (`tpu_pipeline.components.imagenet_files.is_available`); asked
        only for photos whose model is unset.
      measure_rate: times a model's training here, asked only for thousands of photos
        trained from scratch whose epochs are unset; None plans nothing (the
        examples-seen rule decides).
    """
    dataset, trainer = config.dataset, config.trainer
    choices: list[Choice] = []
    fallback = None
    budget = None
    trainer_values: dict[str, Any] = {}
    dataset_values: dict[str, Any] = {}
    model = trainer.model
    pretrained = trainer.pretrained_weights != "none"
    side = survey.median_short_side if survey else None
    count = survey.train_examples if survey else 0
    channels = dataset.image_shape[2]
    size_is_free = dataset.stores_encoded_images and "dataset.image_shape" not in explicit
    # Thousands of CIFAR-10-sized photos: the fast network from scratch beats a backbone
    # that would need them upscaled 3x (9x the compute per image).
    small_and_many = (
        side is not None
        and side <= FAST_MAX_SIDE
        and count >= BUDGETED_MIN_PHOTOS
        and "trainer.pretrained_weights" not in explicit
    )

    if dataset.stores_encoded_images and "trainer.model" not in explicit:
        shape = (backbone_side(side),) * 2 + (channels,) if size_is_free else dataset.image_shape
        if small_and_many:
            model = FAST_MODEL
            choices.append(
                Choice("trainer.model", model, f"{count:,} photos of at most {FAST_MAX_SIDE} px")
            )
        elif "trainer.pretrained_weights" in explicit and not pretrained:
            model = PHOTO_DEFAULT_MODEL
            choices.append(Choice("trainer.model", model, "photos, pretrained_weights none"))
        elif pretrained or imagenet_available(PHOTO_BACKBONE, shape):
            # Weights the user named need a backbone: `imagenet` out of reach then stops the
            # run in one line saying what to fetch.
            model = PHOTO_BACKBONE
            choices.append(Choice("trainer.model", model, "photos: a pretrained backbone"))
            if not pretrained:
                pretrained = True
                trainer_values["pretrained_weights"] = "imagenet"
                choices.append(Choice("trainer.pretrained_weights", "imagenet", "within reach"))
        else:
            model = PHOTO_DEFAULT_MODEL
            fallback = (
                f"no pretrained backbone within reach ({PHOTO_BACKBONE}'s ImageNet file is neither "
                f"in Keras's cache nor downloadable from here): would fine-tune {PHOTO_BACKBONE} "
                f"from ImageNet at {_shown(shape)}; trains {model} from scratch instead"
            )
            choices.append(Choice("trainer.model", model, "photos, from scratch"))
        trainer_values["model"] = model
    backbone = model in IMAGENET_FILES

    if size_is_free and ":" not in model:  # a user's own model takes what it was given
        length = backbone_side(side) if backbone else scratch_side(side)
        shape = (length, length, channels)
        why = "largest ImageNet size the photos cover" if backbone else "CPU-friendly, from scratch"
        dataset_values["image_shape"] = shape
        choices.append(Choice("dataset.image_shape", list(shape), why))
        if "dataset.source.resize" not in explicit and not dataset.source.resize:
            dataset_values["source"] = dataset.source.model_copy(update={"resize": True})

    # The model's own recipe, for the fields nobody set (the batch and epochs come below).
    own = dict(MODEL_RECIPES.get(model, {}))
    own_batch, own_epochs = own.pop("per_replica_batch_size", None), own.pop("epochs", None)
    if not dataset.stores_encoded_images:
        # Pixel data such as digits keeps its handedness (trainer.random_flip's default) and
        # has no photos to crop: those parts of a photo recipe stay unset.
        for name in PHOTO_ONLY_FIELDS:
            own.pop(name, None)
    for name, value in own.items():
        if f"trainer.{name}" not in explicit:
            trainer_values[name] = value
            choices.append(Choice(f"trainer.{name}", value, f"{model}'s recipe"))

    if survey is not None and count:
        free_batch = "trainer.per_replica_batch_size" not in explicit
        if free_batch:
            trainer_values["per_replica_batch_size"] = choose_batch(
                count, own_batch or BATCH_RANGE[1]
            )
        if not explicit & {"trainer.epochs", "trainer.train_steps"}:
            epochs = choose_epochs(count, pretrained)
            why = f"~{epochs * count:,} photos seen"
            if not pretrained and count >= BUDGETED_MIN_PHOTOS and measure_rate is not None:
                batch = trainer_values.get("per_replica_batch_size", trainer.per_replica_batch_size)
                image_shape = tuple(dataset_values.get("image_shape", dataset.image_shape))
                rate = measure_rate(model, image_shape, dataset.num_classes, batch)
                minutes = trainer.time_budget_minutes or DEFAULT_TIME_BUDGET_MINUTES
                target = recipe_target_epochs(own_epochs, count) or SCRATCH_TARGET_EPOCHS
                budget = plan_budget(model, count, survey.eval_examples, minutes, target, rate)
                epochs, why = budget.epochs, f"what {minutes:g} min allow, at most {target}"
            elif own_epochs:
                epochs, why = recipe_target_epochs(own_epochs, count), f"{model}'s recipe"
            trainer_values["epochs"] = epochs
            choices.append(Choice("trainer.epochs", epochs, why))
        if free_batch:
            batch = trainer_values["per_replica_batch_size"]
            if own_batch:  # a short run takes more, smaller steps
                batch = recipe_batch(batch, count, trainer_values.get("epochs", trainer.epochs))
            trainer_values["per_replica_batch_size"] = batch
            steps, dropped = divmod(count, batch)
            choices.insert(
                -1 if choices and choices[-1].field == "trainer.epochs" else len(choices),
                Choice(
                    "trainer.per_replica_batch_size",
                    batch,
                    f"{steps} steps an epoch, {dropped} of {count} left out of each",
                ),
            )
    elif own_epochs and not explicit & {"trainer.epochs", "trainer.train_steps"}:
        trainer_values["epochs"] = own_epochs
        choices.append(Choice("trainer.epochs", own_epochs, f"{model}'s recipe"))
    if own_batch and "per_replica_batch_size" not in trainer_values:
        if "trainer.per_replica_batch_size" not in explicit:
            trainer_values["per_replica_batch_size"] = own_batch
            choices.append(Choice("trainer.per_replica_batch_size", own_batch, f"{model}'s recipe"))

    # A recipe's warmup is a share of its epochs: it keeps that share of the epochs chosen.
    recipe_epochs = MODEL_RECIPES.get(model, {}).get("epochs")
    if "warmup_epochs" in own and "trainer.warmup_epochs" not in explicit and recipe_epochs:
        epochs = trainer_values.get("epochs", trainer.epochs)
        warmup = round(own["warmup_epochs"] * epochs / recipe_epochs, 3)
        trainer_values["warmup_epochs"] = warmup
        choices = [
            Choice(c.field, warmup, c.reason) if c.field == "trainer.warmup_epochs" else c
            for c in choices
        ]

    if backbone and pretrained and "trainer.frozen_backbone_epochs" not in explicit:
        epochs = trainer_values.get("epochs", trainer.epochs)
        frozen = max(1, round(epochs * FROZEN_SHARE))
        trainer_values["frozen_backbone_epochs"] = frozen
        choices.append(
            Choice(
                "trainer.frozen_backbone_epochs",
                frozen,
                f"head alone, then {epochs - frozen} fine-tuning it all",
            )
        )

    updated = config.model_copy(
        update={
            "trainer": trainer.model_validate({**trainer.model_dump(), **trainer_values}),
            "dataset": dataset.model_validate({**dataset.model_dump(), **dataset_values}),
        }
    )
    return Recipe(updated, choices, fallback, survey, budget)
