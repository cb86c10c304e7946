"""The Trainer's own training against a plain `model.fit` on in-memory arrays, per model.

One side is `tpu_pipeline.components.training.task.fit`, the function `run_fn` and the Tuner call:
records through the real Transform graph (`data.build_transform_graph`), the
Trainer's input pipeline, augmentation, callbacks (backups, TensorBoard with
histograms, epoch lines) and validation on the whole eval split every epoch. The
other builds the same model with the same optimizer and calls `model.fit` on
numpy arrays of the same shape and batch, nothing else. Both train two epochs of
the same steps; the second epoch (past tracing and first-pass caching) is the
figure, taken turn about so that load from other jobs hits both alike.
"""

from __future__ import annotations

import dataclasses
import pathlib
import shutil
import statistics
import time

import numpy as np
import tf_keras

from benchmarks import data
from tpu_pipeline.common.config import DatasetConfig, TrainerConfig
from tpu_pipeline.components.models import build_model, compile_model
from tpu_pipeline.components.training.learning_rate import make_optimizer

EPOCHS = 2  # the second is measured: the first traces the step and fills the input cache
TRAIN_RECORDS, EVAL_RECORDS = "train.tfrecord.gz", "eval.tfrecord.gz"
# Eval examples per training example: CIFAR-10's 10,000 test images to its 50,000.
EVAL_FRACTION = 0.2


@dataclasses.dataclass(frozen=True)
class Case:
    """One model at the size it usually trains at, on data of that shape and kind."""

    model: str
    dataset: DatasetConfig
    batch: int
    steps: int  # per epoch

    @property
    def label(self) -> str:
        height, width, _ = self.dataset.image_shape
        kind = "photos" if self.dataset.stores_encoded_images else "pixels"
        return f"{self.model} {height}x{width} {kind} batch {self.batch}"


@dataclasses.dataclass(frozen=True)
class EpochRate:
    """One epoch's figures: images/s while training, and images/s over the whole epoch."""

    train: float
    epoch: float


def cases(steps: int, photo_steps: int) -> list[Case]:
    """Every built-in model at its usual size: digits, CIFAR-10 (as pixels and as the
    JPEG folder the issue timed), and the photo backbones at 224x224 with few steps."""
    cifar_photos = data.photo_dataset((32, 32, 3))
    photos = data.photo_dataset((224, 224, 3))
    return [
        Case("mnist_cnn", data.MNIST_SHAPED, 64, steps),
        Case("cnn_bn", data.MNIST_SHAPED, 64, steps),
        Case("cifar10_cnn", data.CIFAR_SHAPED, 64, steps),
        Case("resnet20", data.CIFAR_SHAPED, 64, steps),
        Case("resnet20", cifar_photos, 64, steps),
        Case("mobilenet_v2", photos, 16, photo_steps),
        Case("efficientnet_b0", photos, 16, photo_steps),
        Case("resnet50", photos, 16, photo_steps),
    ]


def _records(workdir: pathlib.Path, dataset: DatasetConfig, count: int, seed: int) -> None:
    """`count` records of the dataset's kind: float pixels, or JPEG photos as ExampleGen
    stores them (533x400 for photos resized to 224, the source size for smaller ones)."""
    path = workdir / (TRAIN_RECORDS if seed == 0 else EVAL_RECORDS)
    if path.exists():
        return
    if not dataset.stores_encoded_images:
        data.write_examples(path, dataset, count, seed=seed)
        return
    height, width, _ = dataset.image_shape
    size = (533, 400) if height > 100 else (width, height)
    folder = workdir / f"photos-{seed}"
    photos = data.write_photo_folder(folder, count, dataset.num_classes, size, seed=seed)
    data.write_encoded_examples(path, photos, dataset.num_classes)
    shutil.rmtree(folder)


def transformed_split(workdir: pathlib.Path, dataset: DatasetConfig, train: int, evaluate: int):
    """Train and eval records of the dataset's shape, and the Transform graph analysed on them."""
    _records(workdir, dataset, train, seed=0)
    _records(workdir, dataset, evaluate, seed=1)
    return analysed_split(workdir, dataset)


def analysed_split(workdir: pathlib.Path, dataset: DatasetConfig):
    """The TRAIN_RECORDS and EVAL_RECORDS in `workdir`, and the Transform graph analysed on
    the training records (made once per folder)."""
    import tensorflow_transform as tft

    graph = workdir / "transform" / "graph"
    if graph.exists():
        transform_output = tft.TFTransformOutput(str(graph))
    else:
        transform_output = data.build_transform_graph(
            str(workdir / TRAIN_RECORDS), dataset, workdir / "transform"
        )
    return str(workdir / TRAIN_RECORDS), str(workdir / EVAL_RECORDS), transform_output


def trainer_config(case: Case, **overrides) -> TrainerConfig:
    """The Trainer's defaults for this model and batch over EPOCHS epochs."""
    return TrainerConfig(
        model=case.model, per_replica_batch_size=case.batch, epochs=EPOCHS, **overrides
    )


def trainer_fit(
    dataset: DatasetConfig,
    config: TrainerConfig,
    split,
    run_dir: pathlib.Path,
    train_steps: int | None,
) -> tuple:
    """`tpu_pipeline.components.training.task.fit` exactly as `run_fn` trains, on a split of
    `transformed_split`: the trained model, its Keras history and its training_info."""
    from tpu_pipeline.components.device.strategy import resolve_strategy
    from tpu_pipeline.components.training import task
    from tpu_pipeline.components.training.setup import TrainingSetup

    train_file, eval_file, transform_output = split
    setup = TrainingSetup(
        dataset=dataset,
        choice=resolve_strategy(config),
        transform_output=transform_output,
        train_files=[train_file],
        eval_files=[eval_file],
        eval_steps=None,
    )
    shutil.rmtree(run_dir, ignore_errors=True)  # a backup left there would resume, not train
    return task.fit(
        setup,
        config,
        train_steps=train_steps,
        log_dir=str(run_dir / "logs"),
        backup_dir=str(run_dir / "backup"),
    )


def trainer_epoch(case: Case, split, run_dir: pathlib.Path, **overrides) -> EpochRate:
    """The last epoch of `tpu_pipeline.components.training.task.fit`, exactly as `run_fn` trains."""
    config = trainer_config(case, **overrides)
    _, history, _ = trainer_fit(case.dataset, config, split, run_dir, case.steps * EPOCHS)
    # EpochLogger's figures: training images/s (until validation starts) and the whole epoch.
    logs = history.history
    return EpochRate(logs["examples_per_second"][-1], case.steps * case.batch / logs["seconds"][-1])


class _EpochTimer(tf_keras.callbacks.Callback):
    """Seconds of each epoch, as EpochLogger times them (no validation here)."""

    def __init__(self):
        super().__init__()
        self.seconds: list[float] = []

    def on_epoch_begin(self, epoch, logs=None):
        self._started = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.seconds.append(time.perf_counter() - self._started)


def numpy_arrays(case: Case) -> tuple[np.ndarray, np.ndarray]:
    """One epoch of random float images in [0, 1] and labels, in memory."""
    rng = np.random.default_rng(0)
    count = case.steps * case.batch
    images = rng.uniform(0, 1, (count, *case.dataset.image_shape)).astype(np.float32)
    return images, rng.integers(0, case.dataset.num_classes, count)


def plain_fit_epoch(case: Case, arrays: tuple[np.ndarray, np.ndarray]) -> EpochRate:
    """The same model and optimizer in `model.fit(numpy)`: no input pipeline, callbacks or eval."""
    config = trainer_config(case)
    tf_keras.utils.set_random_seed(config.seed)
    model = build_model(case.model, case.dataset.image_shape, case.dataset.num_classes)
    optimizer = make_optimizer(config, case.batch, case.steps, case.steps * EPOCHS)
    compile_model(model, optimizer, jit_compile=False, precision="float32")
    timer = _EpochTimer()
    images, labels = arrays
    model.fit(images, labels, batch_size=case.batch, epochs=EPOCHS, verbose=0, callbacks=[timer])
    rate = case.steps * case.batch / timer.seconds[-1]
    return EpochRate(rate, rate)


def compare(case: Case, workdir: pathlib.Path, repeats: int, variants: dict[str, dict]) -> dict:
    """Median EpochRate of the plain fit and of each Trainer variant, taken turn about.

    `variants` maps a name to TrainerConfig overrides ({} is the Trainer as configured).
    """
    height = case.dataset.image_shape[0]
    kind = "photos" if case.dataset.stores_encoded_images else "pixels"
    data_dir = workdir / f"trainer-vs-fit-{case.dataset.name}-{height}-{kind}-{case.batch}"
    count = case.steps * case.batch
    split = transformed_split(
        data_dir, case.dataset, count, max(case.batch, int(count * EVAL_FRACTION))
    )
    arrays = numpy_arrays(case)
    runs: dict[str, list[EpochRate]] = {"fit": [], **{name: [] for name in variants}}
    for _ in range(repeats):
        runs["fit"].append(plain_fit_epoch(case, arrays))
        for name, overrides in variants.items():
            runs[name].append(trainer_epoch(case, split, data_dir / "run", **overrides))
    return {
        name: EpochRate(
            statistics.median(r.train for r in rates), statistics.median(r.epoch for r in rates)
        )
        for name, rates in runs.items()
    }


def no_augmentation(dataset: DatasetConfig) -> dict:
    """TrainerConfig overrides that turn every augmentation of this kind of data off."""
    if dataset.stores_encoded_images:
        return {"random_flip": False, "random_crop_area": (1.0, 1.0)}
    return {"random_shift": 0.0}


def histogram_rates(model_name: str, dataset: DatasetConfig, workdir: pathlib.Path, repeats: int):
    """Epoch-end weight histograms per second: Keras's eager ones and the Trainer's one function."""
    from tpu_pipeline.components.training.training_logs import TensorBoard

    model = build_model(model_name, dataset.image_shape, dataset.num_classes)
    boards = {
        "keras": tf_keras.callbacks.TensorBoard(str(workdir / "keras"), histogram_freq=1),
        "trainer": TensorBoard(str(workdir / "trainer"), histogram_freq=1),
    }
    for board in boards.values():
        board.set_model(model)
        board._log_weights(0)  # traces the function once
    seconds: dict[str, list[float]] = {name: [] for name in boards}
    for epoch in range(1, repeats + 1):
        for name, board in boards.items():
            started = time.perf_counter()
            board._log_weights(epoch)
            seconds[name].append(time.perf_counter() - started)
    return {name: 1 / statistics.median(values) for name, values in seconds.items()}
