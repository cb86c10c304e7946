"""Defaults that follow the data, for every recipe field the user left unset.

A small folder of photos is what transfer learning is for: with a pretrained backbone
within reach (its ImageNet file in Keras's cache or downloadable now), photos train
MobileNetV2 from ImageNet weights in two phases (the head alone, then the whole
model), at the largest size Keras has ImageNet weights for that the photos cover.
Without one, they train ResNet-20 from scratch at up to 64x64, which learns on a CPU
in minutes (0.75-0.87 on the shipped hand photos, README "Photos"), and the run
says in one line what it would have used. The batch is at most a tenth of the
training split, so an epoch has at least ten steps and the last partial batch drops
under a tenth of it; the epochs give the model about a fixed number of examples to
see. A field the user set (file, flag or --set) always wins.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

from tpu_pipeline.common.config import PHOTO_DEFAULT_MODEL, PipelineConfig
from tpu_pipeline.components.imagenet_files import IMAGENET_FILES, MOBILENET_V2_SIZES
from tpu_pipeline.pipeline.data_tools.data_survey import DataSurvey

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
    """

    config: PipelineConfig
    choices: list[Choice]
    fallback: str | None
    survey: DataSurvey | None

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
            chosen = "; ".join(
                f"{c.field.rpartition('.')[2]} {_shown(c.value)} ({c.reason})" for c in self.choices
            )
            lines.append(
                f"tpu-pipeline: chosen from the data{found}: {chosen}; set a field to "
                "choose it yourself"
            )
        return lines

    def to_json(self) -> dict[str, Any]:
        """For the summary JSON: each chosen field's value and reason, and the fallback."""
        return {
            "fields": {c.field: {"value": c.value, "reason": c.reason} for c in self.choices},
            "fallback": self.fallback,
        }


def _shown(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        return "x".join(str(v) for v in value)
    return str(value)


def _power_of_two_at_most(value: float) -> int:
    return 2 ** max(0, math.floor(math.log2(max(1.0, value))))


def choose_batch(train_examples: int) -> int:
    """The largest power of two in BATCH_RANGE giving at least MIN_STEPS_PER_EPOCH steps."""
    low, high = BATCH_RANGE
    fitting = _power_of_two_at_most(train_examples / MIN_STEPS_PER_EPOCH)
    return max(min(low, train_examples), min(high, fitting))


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
) -> Recipe:
    """Fills in the recipe fields the user left unset from the data.

    Args:
      config: the configuration as loaded.
      explicit: the dotted fields the user set (`tpu_pipeline.common.config.explicit_fields`).
      survey: the photo folder's survey, or None (not an image folder).
      imagenet_available: whether a backbone's ImageNet file for an image shape is
        cached or downloadable now (`tpu_pipeline.components.imagenet_files.is_available`); asked
        only for photos whose model is unset.
    """
    dataset, trainer = config.dataset, config.trainer
    choices: list[Choice] = []
    fallback = None
    trainer_values: dict[str, Any] = {}
    dataset_values: dict[str, Any] = {}
    model = trainer.model
    pretrained = trainer.pretrained_weights != "none"
    side = survey.median_short_side if survey else None
    channels = dataset.image_shape[2]
    size_is_free = dataset.stores_encoded_images and "dataset.image_shape" not in explicit

    if dataset.stores_encoded_images and "trainer.model" not in explicit:
        shape = (backbone_side(side),) * 2 + (channels,) if size_is_free else dataset.image_shape
        if "trainer.pretrained_weights" in explicit and not pretrained:
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

    if survey is not None and survey.train_examples:
        count = survey.train_examples
        if "trainer.per_replica_batch_size" not in explicit:
            batch = choose_batch(count)
            trainer_values["per_replica_batch_size"] = batch
            steps, dropped = divmod(count, batch)
            choices.append(
                Choice(
                    "trainer.per_replica_batch_size",
                    batch,
                    f"{steps} steps an epoch, {dropped} of {count} left out of each",
                )
            )
        if not explicit & {"trainer.epochs", "trainer.train_steps"}:
            epochs = choose_epochs(count, pretrained)
            trainer_values["epochs"] = epochs
            choices.append(Choice("trainer.epochs", epochs, f"~{epochs * count:,} photos seen"))

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
    return Recipe(updated, choices, fallback, survey)
