"""The `cifar_recipe` bench section: `fast_cnn` with its recipe on CIFAR-10-shaped photos.

The training `tpu-pipeline run` gives a folder of 32x32 photos: the configuration the
recipe makes (`pipeline/wiring/recipe.py` filling `fast_cnn`'s recipe,
`MODEL_RECIPES["fast_cnn"]`, into the fields left unset) trained by the Trainer's own
`task.fit` on the JPEGs as ExampleGen stores them, through a real Transform graph
(`trainer_vs_fit.trainer_fit`). Beside it, the probe the recipe plans a time budget
with (`components/training/probe.py`), so the table shows whether the plan's rate holds.

The photos are CIFAR-10's own when a folder of train/<class>/*.jpg and test/<class>/*.jpg
is given (the first photos of each class, as many as the size asks), else synthetic
photos of its shape (`data.write_photo_folder`: classes differ in pattern and disc size,
so their accuracy says nothing about CIFAR-10's).
"""

from __future__ import annotations

import dataclasses
import pathlib

from benchmarks import data, trainer_vs_fit
from tpu_pipeline.common.config import DatasetConfig, PipelineConfig, TrainerConfig
from tpu_pipeline.components.models import training_flops
from tpu_pipeline.components.training.probe import TrainingRate, probe_training_rate
from tpu_pipeline.pipeline.data_tools.data_survey import DataSurvey
from tpu_pipeline.pipeline.wiring.recipe import FAST_MODEL, accuracy_class, choose_recipe

CIFAR_SIDE = 32
# CIFAR-10's splits: what a full-size run trains and tests on.
CIFAR_TRAIN, CIFAR_TEST = 50_000, 10_000
# airbench94, the recipe fast_cnn follows: 94.01 % mean test accuracy on CIFAR-10 from
# 3.6e14 FLOPs of training (Jordan, 2024, "94% on CIFAR-10 in 3.29 Seconds on a Single
# GPU", arXiv 2404.00498, its list of methods; the cifar10-airbench README's table says
# 0.36 PFLOPs for airbench94.py). That is about 10 epochs of 50,000 images, ~0.72 GFLOP an
# image, where `components/models/_flops.py` counts fast_cnn's training at 0.71: the two
# counts agree. Its 94 % includes test-time flips; the accuracy here is the last epoch's
# validation, without them.
AIRBENCH94_PFLOP = 0.36
AIRBENCH94_ACCURACY = 0.9401


@dataclasses.dataclass(frozen=True)
class RecipeRun:
    """One training of the recipe, and the probe beside it.

    Attributes:
      trainer: the configuration the recipe made.
      train_images, test_images: the splits' sizes.
      real: CIFAR-10's own photos (else synthetic ones of its shape).
      images_per_second: the last epoch's training images/s (EpochLogger's: input
        pipeline and augmentation in, validation out).
      probe: the probe's rate, as the recipe measures it before planning epochs.
      training_flops: FLOPs of one training image.
      images_seen: training images over the whole training.
      accuracy: the last epoch's validation accuracy on the test split.
    """

    trainer: TrainerConfig
    train_images: int
    test_images: int
    real: bool
    images_per_second: float
    probe: TrainingRate
    training_flops: int
    images_seen: int
    accuracy: float

    @property
    def training_pflop(self) -> float:
        """The training's compute: images seen x FLOPs of one training image."""
        return self.images_seen * self.training_flops / 1e15

    @property
    def planned_accuracy(self) -> str | None:
        """What the recipe's plan says this many images seen buy on CIFAR-10."""
        return accuracy_class(FAST_MODEL, self.images_seen)


def cifar_dataset() -> DatasetConfig:
    """A folder of CIFAR-10-sized colour photos in 10 classes, as `tpu-pipeline run` reads one."""
    return data.photo_dataset((CIFAR_SIDE, CIFAR_SIDE, 3))


def _first_of_each_class(split: pathlib.Path, count: int) -> list[pathlib.Path]:
    """`count` photos of `split`, the first (by name) of each class folder in turn."""
    classes = sorted(path for path in split.iterdir() if path.is_dir())
    per_class = -(-count // len(classes))
    return [photo for folder in classes for photo in sorted(folder.glob("*.jpg"))[:per_class]]


def cifar_split(workdir: pathlib.Path, cifar: pathlib.Path | None, train: int, test: int):
    """Train and test records (CIFAR-10's photos, or synthetic ones) and their Transform graph."""
    folder = workdir / f"cifar-{'real' if cifar else 'synthetic'}-{train}-{test}"
    dataset = cifar_dataset()
    if cifar is None:
        return trainer_vs_fit.transformed_split(folder, dataset, train, test)
    folder.mkdir(parents=True, exist_ok=True)
    for records, split, count in (
        (trainer_vs_fit.TRAIN_RECORDS, "train", train),
        (trainer_vs_fit.EVAL_RECORDS, "test", test),
    ):
        if not (folder / records).exists():
            photos = _first_of_each_class(cifar / split, count)
            data.write_encoded_examples(folder / records, photos, dataset.num_classes)
    return trainer_vs_fit.analysed_split(folder, dataset)


def recipe_config(train: int, test: int, epochs: int | None) -> TrainerConfig:
    """What the recipe makes of `train` and `test` CIFAR-sized photos with `fast_cnn` named.

    The recipe's batch and schedule for that many photos; its epochs (scaled to see about
    as many images as 10 epochs of CIFAR-10) unless `epochs` is given. No time budget is
    planned: a benchmark's length is its size, not this machine's speed today.
    """
    trainer = {"model": FAST_MODEL, **({"epochs": epochs} if epochs else {})}
    config = PipelineConfig(dataset=cifar_dataset(), trainer=TrainerConfig(**trainer))
    explicit = {"dataset.image_shape", *(f"trainer.{name}" for name in trainer)}
    survey = DataSurvey(train, CIFAR_SIDE, sampled=train, eval_examples=test)
    recipe = choose_recipe(config, frozenset(explicit), survey, lambda *_: False)
    return recipe.config.trainer


def run_recipe(
    workdir: pathlib.Path,
    cifar: pathlib.Path | None,
    train: int,
    test: int,
    epochs: int | None,
    train_steps: int | None,
) -> RecipeRun:
    """Probes, then trains the recipe on `train` photos, validating on `test` every epoch.

    Args:
      workdir: where the records, the Transform graph and the training's logs go.
      cifar: CIFAR-10 as train/<class>/*.jpg and test/<class>/*.jpg, or None (synthetic).
      train, test: photos of each split.
      epochs: the training's epochs; None: the recipe's.
      train_steps: steps in all instead of the epochs' (a smoke run's few), or None.
    """
    split = cifar_split(workdir, cifar, train, test)
    config = recipe_config(train, test, epochs)
    dataset = cifar_dataset()
    probe = probe_training_rate(
        config, FAST_MODEL, dataset.image_shape, dataset.num_classes, config.per_replica_batch_size
    )
    run_dir = workdir / "cifar-recipe-run"
    model, history, info = trainer_vs_fit.trainer_fit(dataset, config, split, run_dir, train_steps)
    logs = history.history
    return RecipeRun(
        trainer=config,
        train_images=train,
        test_images=test,
        real=cifar is not None,
        images_per_second=logs["examples_per_second"][-1],
        probe=probe,
        training_flops=training_flops(model),
        images_seen=info["train_steps"] * info["global_batch_size"],
        accuracy=logs["val_accuracy"][-1],
    )
