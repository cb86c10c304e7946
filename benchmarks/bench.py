"""`make bench`: side-by-side ratios against the peers and the hardware, as one table.

Every figure is a ratio of two things measured in the same run, interleaved
repeat by repeat so that load from other processes hits both sides alike, and
reported as the median of the repeats. Sections are selectable, so a quick
subset runs in a few minutes:

    python -m benchmarks.bench                        # every section
    python -m benchmarks.bench --only trainer,xla     # some sections
    python -m benchmarks.bench --quick                # fewer steps, smaller data
    python -m benchmarks.bench --smoke                # the least that runs each section

Results and the command that produced them go into docs/benchmarks.md. The test suite
runs every section at smoke size (tests/benchmarks/test_bench_smoke.py), so a section
the product's output or its own code broke fails a test, not a benchmark run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from typing import TypeVar
from unittest import mock

from tpu_pipeline import common  # noqa: F401 (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402

from benchmarks import (  # noqa: E402
    attributions,
    cifar_recipe,
    data,
    evaluator_slices,
    model_card,
    pruning,
    runs_history,
    trainer_vs_fit,
)
from benchmarks.flops import training_flops  # noqa: E402
from tpu_pipeline.common.config import DatasetConfig, TrainerConfig  # noqa: E402
from tpu_pipeline.common.owned_paths import UserPathError, claim_folder  # noqa: E402
from tpu_pipeline.common.work_dirs import WorkDirs  # noqa: E402
from tpu_pipeline.components.device.policy import DEVICE_DEFAULTS  # noqa: E402
from tpu_pipeline.components.models import BACKBONES, MODEL_BUILDERS, build_model, compile_model  # noqa: E402
from tpu_pipeline.components.training import input_pipeline  # noqa: E402
from tpu_pipeline.components.training.autograph import skip_autograph_for_graph_safe_code  # noqa: E402
from tpu_pipeline.components.training.input_pipeline import make_dataset  # noqa: E402

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
# The `tpu-pipeline` console command, run as its module: the same code, and no
# dependency on the entry-point script being installed.
TPU_PIPELINE = (sys.executable, "-m", "tpu_pipeline.cli.main")
# The image shape each built-in model is benchmarked on (CIFAR-shaped for any other).
MODEL_SHAPES = {
    "cnn_bn": data.MNIST_SHAPED,
    "mnist_cnn": data.MNIST_SHAPED,
    "cifar10_cnn": data.CIFAR_SHAPED,
    "resnet20": data.CIFAR_SHAPED,
}
# The CPU choices (XLA, steps per call) are measured for the CNNs; the backbones are for
# accelerators, and each of their rows would add minutes of XLA:CPU compiling.
CPU_BENCHED_MODELS = [name for name in MODEL_BUILDERS if name not in BACKBONES]
# steps_per_execution measured against 1 (the spe section).
SPE_N = 10
T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Row:
    """One line of the table: a ratio, what it divides, and the target it is held to."""

    section: str
    figure: str
    measured: str
    ratio: float | None
    target: str = ""
    met: bool | None = None


@dataclasses.dataclass(frozen=True)
class Settings:
    """Every size a section works at: sections read their sizes here and nowhere else, so a
    smaller size (`--quick`, `--smoke`) takes each section's own code path, only shorter.

    `SIZES` below holds the three sizes; the folders come from the command line.
    """

    repeats: int
    steps: int  # training steps of one timed `fit`
    batch: int
    large_batch: int
    scale_sizes: tuple[int, ...]
    workdir: pathlib.Path
    # Records and photos of the whole-pipeline runs and photo folders: each section's
    # full-size count divided by this (each keeps the few a split needs).
    pipeline_divisor: int = 1
    # The models, shapes or formats a section measures, in its order: all (None) or the first n.
    cases: int | None = None
    # Epochs of the trainings that follow a recipe of their own (photo_pipeline, pruning,
    # cifar_recipe); None: the recipe's.
    epochs: int | None = None
    # Training steps (in one epoch) of every `tpu-pipeline run`, the TFX peer's run and
    # cifar_recipe's training; None: each one's own.
    train_steps: int | None = None
    # `--set FIELD=VALUE` every `tpu-pipeline run` gets after its own: work no section
    # measures at this size, left out.
    run_sets: tuple[str, ...] = ()
    # Synthetic records the input-path sections read.
    records: int = 4096
    # Copies of the built-in data a `predict` job reads; None: PREDICT_DATA's (half a minute).
    predict_copies: int | None = None
    # The photo_pipeline section's image side.
    photo_side: int = 96
    # The photo_memory section's image side: the photo recipe's 224 where its peak counts.
    memory_photo_side: int = 224
    # Real photos for the photo_pipeline section: train/<class>/ and validation/<class>/.
    photos: pathlib.Path | None = None
    # Real CIFAR-10 for the cifar_recipe section: train/<class>/*.jpg and test/<class>/*.jpg.
    cifar: pathlib.Path | None = None

    def first(self, cases: Iterable[T]) -> list[T]:
        """The cases (models, shapes, formats) a section measures: every one, or the first few."""
        return list(cases)[: self.cases]

    def run_flags(self) -> list[str]:
        """What every `tpu-pipeline run` adds after its own flags (`--set`s win over them and
        over its config file): `train_steps` in one epoch, and `run_sets`."""
        sets = list(self.run_sets)
        if self.train_steps is not None:
            sets += [f"trainer.train_steps={self.train_steps}", "trainer.epochs=1"]
        return [flag for value in sets for flag in ("--set", value)]


# The sizes `main` offers. Full: the figures of docs/benchmarks.md; quick: a few minutes a
# section; smoke: the least that still runs each section end to end, for the test suite
# (tests/benchmarks/test_bench_smoke.py), whose figures mean nothing.
SIZES: dict[str, dict] = {
    "full": {
        "repeats": 5,
        "steps": 50,
        "batch": TrainerConfig().per_replica_batch_size,
        "large_batch": 512,
        "scale_sizes": (10_000, 100_000, 300_000),
    },
    "quick": {
        "repeats": 3,
        "steps": 20,
        "batch": TrainerConfig().per_replica_batch_size,
        "large_batch": 512,
        "scale_sizes": (10_000, 30_000),
        "pipeline_divisor": 10,
        "epochs": 5,
        "photo_side": 64,
    },
    "smoke": {
        "repeats": 1,
        "steps": 3,
        "batch": 16,
        "large_batch": 32,
        "scale_sizes": (200,),
        "pipeline_divisor": 1000,
        "cases": 1,
        "epochs": 1,
        "train_steps": 2,
        "run_sets": (
            "serving.tflite_variants=[]",
            "explain.mistakes=0",
            "explain.correct_per_class=0",
        ),
        "records": 256,
        "predict_copies": 1,
        "photo_side": 32,
        "memory_photo_side": 32,
    },
}


def sized(size: str, workdir: pathlib.Path, **folders: pathlib.Path | None) -> Settings:
    """The Settings of one of SIZES, with the work folder and any real-data folders."""
    return Settings(**SIZES[size], workdir=workdir, **folders)


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    """Median wall time of `repeats` calls of `fn`."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def interleaved_rates(work: dict[str, Callable[[], float]], repeats: int) -> dict[str, float]:
    """Median of the rates each named function returns, taking turns A, B, A, B, ..."""
    rates: dict[str, list[float]] = {name: [] for name in work}
    for _ in range(repeats):
        for name, fn in work.items():
            rates[name].append(fn())
    return {name: statistics.median(values) for name, values in rates.items()}


def _ratio_row(section, figure, rates, numerator, denominator, unit, target=None) -> Row:
    ratio = rates[numerator] / rates[denominator]
    measured = f"{rates[numerator]:,.0f} vs {rates[denominator]:,.0f} {unit}"
    met = None if target is None else ratio >= target
    return Row(section, figure, measured, ratio, "" if target is None else f">= {target:g}", met)


# --- Model helpers ------------------------------------------------------------------------


def cpu_model(
    name: str,
    dataset: DatasetConfig,
    jit_compile: bool | None = None,
    steps_per_execution: int | None = None,
) -> tf_keras.Model:
    """The named model, compiled as the Trainer compiles it on this CPU, or with overrides."""
    cpu = DEVICE_DEFAULTS["cpu"]
    model = build_model(name, dataset.image_shape, dataset.num_classes, cpu.precision)
    compile_model(
        model,
        tf_keras.optimizers.Adam(TrainerConfig().learning_rate),
        cpu.jit_compile if jit_compile is None else jit_compile,
        cpu.precision,
        steps_per_execution or cpu.steps_per_execution,
    )
    return model


def in_memory_batches(dataset: DatasetConfig, batch: int) -> tf.data.Dataset:
    """One batch repeated forever: measures the model alone, with no input cost."""
    rng = np.random.default_rng(0)
    images = rng.uniform(0, 1, (batch, *dataset.image_shape)).astype(np.float32)
    labels = rng.integers(0, dataset.num_classes, batch)
    return tf.data.Dataset.from_tensors((images, labels)).repeat()


class SteadyRate(tf_keras.callbacks.Callback):
    """Examples/s between the end of the first batch and the end of the last one.

    Leaves out what each `fit` call pays once (callbacks, data adapters, the
    first batch's start-up), which a long training run amortises away.
    """

    def __init__(self, batch_size: int):
        super().__init__()
        self.batch_size = batch_size
        self.ends: list[float] = []

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self.ends.append(time.perf_counter())

    def rate(self) -> float:
        return (len(self.ends) - 1) * self.batch_size / (self.ends[-1] - self.ends[0])


def fit_rate(model: tf_keras.Model, examples_per_batch: int, *args, **kwargs) -> float:
    """Steady-state examples/s of one `model.fit(*args, **kwargs)` epoch."""
    timer = SteadyRate(examples_per_batch)
    model.fit(*args, epochs=1, verbose=0, callbacks=[timer], **kwargs)
    return timer.rate()


def fit_steps(
    model: tf_keras.Model, dataset: tf.data.Dataset, batch: int, steps: int
) -> Callable[[], float]:
    return lambda: fit_rate(model, batch, dataset, steps_per_epoch=steps)


def trainer_input(
    settings: Settings, dataset: DatasetConfig, batch: int, count: int
) -> tf.data.Dataset:
    """The Trainer's own input path over synthetic records, with a real transform graph.

    One whole pass is read first: a long Trainer run is past its first epoch almost
    all the time, so its steady state includes make_dataset's in-memory cache.
    """
    workdir = settings.workdir / f"input-{dataset.name}"
    records = workdir / "train.tfrecord.gz"
    if not records.exists():
        data.write_examples(records, dataset, count)
    graph_dir = workdir / "transform"
    if (graph_dir / "graph").exists():
        import tensorflow_transform as tft

        transform_output = tft.TFTransformOutput(str(graph_dir / "graph"))
    else:
        transform_output = data.build_transform_graph(str(records), dataset, graph_dir)
    pipeline_ds = make_dataset(
        [str(records)], transform_output, dataset, batch, seed=TrainerConfig().seed
    )
    drain(pipeline_ds, batch, count // batch + 2)()
    return pipeline_ds


def drain(dataset: tf.data.Dataset, batch: int, batches: int) -> Callable[[], float]:
    """Examples/s of the input pipeline alone, after its first batch."""
    iterator = iter(dataset)

    def run() -> float:
        next(iterator)
        started = time.perf_counter()
        for _ in range(batches - 1):
            next(iterator)
        return (batches - 1) * batch / (time.perf_counter() - started)

    return run


# --- Sections -----------------------------------------------------------------------------


def bench_trainer(settings: Settings) -> list[Row]:
    """Trainer input path vs model.fit(numpy), and the input pipeline's headroom."""
    dataset, batch, steps = data.MNIST_SHAPED, settings.batch, settings.steps
    count = max(settings.records, batch * 8)
    pipeline_ds = trainer_input(settings, dataset, batch, count)
    # The input as it was before make_dataset cached small training sets (the "before" figure).
    with mock.patch.object(input_pipeline, "CACHE_MAX_GZIP_BYTES", 0):
        uncached_ds = trainer_input(settings, dataset, batch, count)
    rng = np.random.default_rng(0)
    images = rng.uniform(0, 1, (steps * batch, *dataset.image_shape)).astype(np.float32)
    labels = rng.integers(0, dataset.num_classes, steps * batch)
    model = cpu_model("mnist_cnn", dataset)
    numpy_model = cpu_model("mnist_cnn", dataset)

    work = {
        "trainer": fit_steps(model, pipeline_ds, batch, steps),
        "numpy": lambda: fit_rate(numpy_model, batch, images, labels, batch_size=batch),
        "input": drain(pipeline_ds, batch, steps),
        "input_uncached": drain(uncached_ds, batch, steps),
    }
    for fn in work.values():  # traces and warms caches
        fn()
    rates = interleaved_rates(work, settings.repeats)
    figure = f"mnist_cnn batch {batch}"
    return [
        _ratio_row(
            "trainer",
            f"Trainer input path / fit(numpy), {figure}",
            rates,
            "trainer",
            "numpy",
            "ex/s",
            0.95,
        ),
        _ratio_row(
            "trainer",
            "input pipeline alone / Trainer consumption",
            rates,
            "input",
            "trainer",
            "ex/s",
            5,
        ),
        _ratio_row(
            "trainer",
            "input alone, in-memory cache on / off",
            rates,
            "input",
            "input_uncached",
            "ex/s",
        ),
    ]


def bench_xla(settings: Settings) -> list[Row]:
    """jit_compile on / off per built-in model, and whether the CPU default picks the faster."""
    rows = []
    default_jit = DEVICE_DEFAULTS["cpu"].jit_compile
    for name in settings.first(CPU_BENCHED_MODELS):
        dataset = MODEL_SHAPES.get(name, data.CIFAR_SHAPED)
        batches = in_memory_batches(dataset, settings.batch)
        work = {
            "xla": fit_steps(
                cpu_model(name, dataset, True), batches, settings.batch, settings.steps
            ),
            "no_xla": fit_steps(
                cpu_model(name, dataset, False), batches, settings.batch, settings.steps
            ),
        }
        for fn in work.values():
            fn()
        rates = interleaved_rates(work, settings.repeats)
        rows.append(
            _ratio_row(
                "xla",
                f"jit_compile on / off, {name} batch {settings.batch}",
                rates,
                "xla",
                "no_xla",
                "ex/s",
            )
        )
        chosen = rates["xla" if default_jit else "no_xla"]
        best = max(rates.values())
        rows.append(
            Row(
                "xla",
                f"CPU default (jit_compile={default_jit}) / best, {name}",
                f"{chosen:,.0f} vs {best:,.0f} ex/s",
                chosen / best,
                ">= 0.98",
                chosen / best >= 0.98,
            )
        )
    return rows


def bench_cpu_precision(settings: Settings) -> list[Row]:
    """mixed_bfloat16 / float32 on this CPU, per built-in CNN, in-memory batches.

    CPUs with AMX or AVX512-BF16 run oneDNN's bfloat16 convolutions natively; on such a
    CPU the Trainer's default is mixed_bfloat16 (`components/device/policy.py`).
    """
    rows = []
    for name in settings.first(CPU_BENCHED_MODELS):
        dataset = MODEL_SHAPES.get(name, data.CIFAR_SHAPED)
        batches = in_memory_batches(dataset, settings.batch)
        models = {}
        for precision in ("mixed_bfloat16", "float32"):
            model = build_model(name, dataset.image_shape, dataset.num_classes, precision)
            optimizer = tf_keras.optimizers.Adam(TrainerConfig().learning_rate)
            compile_model(model, optimizer, False, precision)
            models[precision] = model
        work = {
            precision: fit_steps(model, batches, settings.batch, settings.steps)
            for precision, model in models.items()
        }
        for fn in work.values():
            fn()
        rates = interleaved_rates(work, settings.repeats)
        rows.append(
            _ratio_row(
                "cpu_precision",
                f"mixed_bfloat16 / float32, {name} batch {settings.batch}",
                rates,
                "mixed_bfloat16",
                "float32",
                "ex/s",
            )
        )
    return rows


def bench_steps_per_execution(settings: Settings) -> list[Row]:
    """Trainer examples/s with SPE_N training steps per tf.function call / one, per model.

    Each model trains on the Trainer's own input path (make_dataset over records
    of its image shape, with a real transform graph), as `run_fn` feeds it.
    """
    rows = []
    steps = max(settings.steps, 2 * SPE_N) // SPE_N * SPE_N  # whole executions only
    for name in settings.first(CPU_BENCHED_MODELS):
        dataset = MODEL_SHAPES.get(name, data.CIFAR_SHAPED)
        batches = trainer_input(
            settings, dataset, settings.batch, max(settings.records, settings.batch * 8)
        )
        work = {
            spe: fit_steps(
                cpu_model(name, dataset, steps_per_execution=spe),
                batches,
                settings.batch * spe,  # one on_train_batch_end per execution
                steps,
            )
            for spe in (SPE_N, 1)
        }
        for fn in work.values():
            fn()
        rates = interleaved_rates(work, settings.repeats)
        rows.append(
            _ratio_row(
                "spe",
                f"steps_per_execution {SPE_N} / 1, {name} batch {settings.batch}",
                rates,
                SPE_N,
                1,
                "ex/s",
            )
        )
    return rows


def bench_trainer_vs_fit(settings: Settings) -> list[Row]:
    """Every built-in model through `components.training.task.fit` vs `model.fit(numpy)`, same run.

    Three figures per model, each over its second epoch: images/s while training
    (input pipeline, augmentation and per-step callbacks included), the whole
    epoch's images/s (validation on the eval split and the epoch-end callbacks
    added), and training with augmentation off, which tells its share apart.
    """
    rows = []
    for name, dataset in settings.first(
        [("resnet20", data.CIFAR_SHAPED), ("mobilenet_v2", data.photo_dataset((224, 224, 3)))]
    ):
        rates = trainer_vs_fit.histogram_rates(
            name, dataset, settings.workdir / f"histograms-{name}", settings.repeats
        )
        rows.append(
            _ratio_row(
                "trainer_vs_fit",
                f"epoch-end weight histograms, one function / Keras's eager ops, {name}",
                rates,
                "trainer",
                "keras",
                "per s",
            )
        )
    photo_steps = 3 if settings.pipeline_divisor > 1 else 6
    for case in settings.first(trainer_vs_fit.cases(settings.steps, photo_steps)):
        photos = case.dataset.image_shape[0] > 100
        variants = {"trainer": {}}
        if not photos:  # the backbones' minutes of CPU go to the main figures only
            variants["no_augmentation"] = trainer_vs_fit.no_augmentation(case.dataset)
        repeats = 1 if photos else settings.repeats
        rates = trainer_vs_fit.compare(case, settings.workdir, repeats, variants)
        fit = rates["fit"].train
        train = {name: rate.train for name, rate in rates.items()}
        rows.append(
            _ratio_row(
                "trainer_vs_fit",
                f"Trainer training / fit(numpy), {case.label}",
                train,
                "trainer",
                "fit",
                "images/s",
                0.9,
            )
        )
        epoch = {"trainer": rates["trainer"].epoch, "fit": fit}
        rows.append(
            _ratio_row(
                "trainer_vs_fit",
                f"Trainer whole epoch (+ eval, epoch-end callbacks) / fit(numpy), {case.label}",
                epoch,
                "trainer",
                "fit",
                "images/s",
            )
        )
        if "no_augmentation" in rates:
            rows.append(
                _ratio_row(
                    "trainer_vs_fit",
                    f"Trainer training without augmentation / fit(numpy), {case.label}",
                    train,
                    "no_augmentation",
                    "fit",
                    "images/s",
                )
            )
        for row in rows[-len(variants) - 1 :]:  # figures as they come: the section is long
            print(f"[bench] {row.figure}: {row.measured}", file=sys.stderr, flush=True)
    return rows


def matmul_flops_per_s(
    repeats: int, size: int = 2048, chain: int = 8, dtype: tf.DType = tf.float32
) -> float:
    """This machine's dense matmul rate in `dtype` (the compute ceiling for a CNN's FLOPs)."""
    a = tf.cast(tf.random.uniform([size, size]), dtype)
    b = tf.cast(tf.random.uniform([size, size]) / size, dtype)

    @tf.function
    def chained() -> tf.Tensor:
        x = a
        for _ in range(chain):
            x = tf.matmul(x, b)
        return x

    chained().numpy()
    seconds = median_seconds(lambda: chained().numpy(), repeats)
    return chain * 2 * size**3 / seconds


def bench_efficiency(settings: Settings) -> list[Row]:
    """Achieved training FLOP/s of the CIFAR-10 CNN and ResNet-20 / measured matmul FLOP/s."""
    dataset, batch = data.CIFAR_SHAPED, settings.large_batch
    steps = max(3, settings.steps // 4)
    pipeline_ds = trainer_input(settings, dataset, batch, count=batch * 4)
    peak = matmul_flops_per_s(settings.repeats)
    rows = []
    for name in settings.first(("cifar10_cnn", "resnet20")):
        model = cpu_model(name, dataset)
        flops_per_example = training_flops(model)
        work = {
            "trainer": fit_steps(model, pipeline_ds, batch, steps),
            "compute": fit_steps(model, in_memory_batches(dataset, batch), batch, steps),
        }
        for fn in work.values():
            fn()
        rates = interleaved_rates(work, settings.repeats)
        for kind, label in (("trainer", "Trainer"), ("compute", "in-memory batches")):
            achieved = rates[kind] * flops_per_example
            rows.append(
                Row(
                    "efficiency",
                    f"{label} FLOP/s / matmul FLOP/s, {name} batch {batch}",
                    f"{achieved / 1e9:,.1f} vs {peak / 1e9:,.1f} GFLOP/s "
                    f"({flops_per_example / 1e6:.1f} MFLOP/example)",
                    achieved / peak,
                    ">= 0.4",
                    achieved / peak >= 0.4,
                )
            )
    return rows


def bench_cifar_recipe(settings: Settings) -> list[Row]:
    """fast_cnn with its recipe on CIFAR-10-shaped photos (benchmarks/cifar_recipe.py): its
    images/s against the probe's, its FLOP/s against matmul's, its PFLOP against airbench94's."""
    run = cifar_recipe.run_recipe(
        settings.workdir,
        settings.cifar,
        cifar_recipe.CIFAR_TRAIN // settings.pipeline_divisor,
        cifar_recipe.CIFAR_TEST // settings.pipeline_divisor,
        settings.epochs,
        settings.train_steps,
    )
    # The ceiling in the type the model computes in (bfloat16 where the CPU runs it natively).
    compute = tf_keras.mixed_precision.Policy(run.probe.precision).compute_dtype
    peak = matmul_flops_per_s(settings.repeats, dtype=tf.as_dtype(compute))
    achieved = run.images_per_second * run.training_flops
    source = "CIFAR-10" if run.real else "synthetic CIFAR-shaped"
    trainer = run.trainer
    epochs = f"{trainer.epochs} epoch" + ("s" if trainer.epochs > 1 else "")
    figure = (
        f"{run.train_images:,} {source} photos, batch {trainer.per_replica_batch_size}, {epochs}"
    )
    planned = run.planned_accuracy or "no figures"
    airbench = f"{cifar_recipe.AIRBENCH94_PFLOP:g} PFLOP to {cifar_recipe.AIRBENCH94_ACCURACY:.2f}"
    return [
        Row(
            "cifar_recipe",
            f"fast_cnn recipe training images/s / the probe's ({run.probe.precision}), {figure}",
            f"{run.images_per_second:,.0f} vs {run.probe.images_per_second:,.0f} images/s",
            run.images_per_second / run.probe.images_per_second,
        ),
        Row(
            "cifar_recipe",
            f"fast_cnn recipe training FLOP/s / matmul FLOP/s ({compute}), {figure}",
            f"{achieved / 1e9:,.1f} vs {peak / 1e9:,.1f} GFLOP/s "
            f"({run.training_flops / 1e9:.2f} GFLOP/image)",
            achieved / peak,
        ),
        Row(
            "cifar_recipe",
            f"training PFLOP to the reached accuracy / airbench94's {airbench}, {figure}",
            f"{run.training_pflop:.3g} PFLOP to {run.accuracy:.3f} on {run.test_images:,} test "
            f"photos ({run.images_seen:,} images seen, for which the recipe's plan says: "
            f"{planned}) vs {airbench}",
            run.training_pflop / cifar_recipe.AIRBENCH94_PFLOP,
        ),
    ]


def run_measured(command: list[str], log: pathlib.Path) -> dict:
    """Runs a command; returns wall seconds, peak RSS (GB), its output lines with arrival times.

    stdout and stderr are read as one stream (progress lines go to stderr, results to
    stdout) and also written to `log`.
    """
    rss_file = log.with_suffix(".rss")
    started = time.perf_counter()
    lines = []
    with open(log, "w") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.rss", str(rss_file), *command],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=REPO_ROOT,
        )
        for line in process.stdout:
            output.write(line)
            lines.append((time.perf_counter() - started, line.rstrip("\n")))
        returncode = process.wait()
    wall = time.perf_counter() - started
    if returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed; see {log}")
    return {"wall_s": wall, "peak_rss_gb": float(rss_file.read_text()), "lines": lines}


def bench_e2e(settings: Settings) -> list[Row]:
    """`tpu-pipeline run --dataset mnist` vs TFX's MNIST example on the same records."""
    ours_dir, peer_dir = settings.workdir / "e2e-ours", settings.workdir / "e2e-peer"
    for folder in (ours_dir, peer_dir):  # a rerun must not hit the first run's cache
        shutil.rmtree(folder, ignore_errors=True)
    summary = ours_dir / "summary.json"
    ours = run_measured(
        [
            *TPU_PIPELINE,
            "run",
            "--dataset",
            "mnist",
            "--output-dir",
            str(ours_dir),
            "--summary-json",
            str(summary),
            *settings.run_flags(),
        ],
        settings.workdir / "e2e-ours.log",
    )
    ours_summary = json.loads(summary.read_text())
    our_accuracy = ours_summary["metrics"]["accuracy"]
    peer_training = (
        [] if settings.train_steps is None else ["--train-steps", str(settings.train_steps)]
    )
    # The fair comparison first: the peer run the way ours runs.
    modes = settings.first([("in-process", ["--in-process"]), ("shipped", [])])
    peers = {
        mode: run_measured(
            [sys.executable, "-m", "benchmarks.peer", str(peer_dir / mode), *flags, *peer_training],
            settings.workdir / f"e2e-peer-{mode}.log",
        )
        for mode, flags in modes
    }
    rows = []
    for mode, peer in peers.items():
        peer_line = next(line for _, line in peer["lines"] if line.startswith("PEER_METRICS "))
        peer_accuracy = json.loads(peer_line.removeprefix("PEER_METRICS "))[
            "sparse_categorical_accuracy"
        ]
        how = (
            "as shipped (multi-process Beam)"
            if mode == "shipped"
            else "run like ours (LocalDagRunner, one process)"
        )
        time_ratio = ours["wall_s"] / peer["wall_s"]
        rows += [
            Row(
                "e2e",
                f"tpu-pipeline run / TFX mnist example {how}, wall time",
                f"{ours['wall_s']:.1f} vs {peer['wall_s']:.1f} s",
                time_ratio,
                "<= 0.8",
                time_ratio <= 0.8,
            ),
            Row(
                "e2e",
                f"accuracy, ours / TFX mnist example {how}",
                f"{our_accuracy:.3f} vs {peer_accuracy:.3f}",
                our_accuracy / peer_accuracy,
                ">= 1",
                our_accuracy >= peer_accuracy,
            ),
            Row(
                "e2e",
                f"peak RSS, ours / TFX mnist example {how}",
                f"{ours['peak_rss_gb']:.2f} vs {peer['peak_rss_gb']:.2f} GB",
                ours["peak_rss_gb"] / peer["peak_rss_gb"],
            ),
        ]
    first_component_s = first_component_started(ours["lines"], ours_summary)
    return rows + startup_rows(settings, first_component_s)


def first_component_started(run_lines: list[tuple[float, str]], summary: dict) -> float:
    """Seconds from the command to the start of the run's first component.

    The summary JSON names the first component; its start line (`[ 1/N] ExampleGen  running`,
    printed as it starts: `pipeline/local/runner.py`) is the one moment the JSON cannot give.
    """
    first = summary["components"][0]["id"]
    start_line = re.compile(rf"\[\s*1/\d+\]\s+{re.escape(first)}\s+running")
    started = next((t for t, text in run_lines if start_line.fullmatch(text.strip())), None)
    if started is None:
        raise ValueError(f"no `[ 1/N] {first}  running` line in the run's output")
    return started


# What a `tpu-pipeline run` imports before its first component, by the names the command
# imports them as: the checkout's top-level `cli` would import a second copy of each module.
STARTUP_IMPORTS = "tpu_pipeline.cli.main, tpu_pipeline.pipeline.local.runner"


def import_seconds() -> float:
    """Seconds a fresh interpreter takes to import STARTUP_IMPORTS, timed inside it: the
    child's whole life would add its exit, which after TensorFlow is a second or more."""
    timed = (
        "import time; started = time.perf_counter(); "
        f"import {STARTUP_IMPORTS}; print(time.perf_counter() - started)"
    )
    done = subprocess.run(
        [sys.executable, "-c", timed], check=True, capture_output=True, text=True, cwd=REPO_ROOT
    )
    return float(done.stdout.strip().splitlines()[-1])


def startup_rows(settings: Settings, first_component_s: float) -> list[Row]:
    """Command to first component, and the share of it spent importing libraries."""
    imports = statistics.median(import_seconds() for _ in range(settings.repeats))
    help_s = median_seconds(
        lambda: subprocess.run([*TPU_PIPELINE, "--help"], check=True, capture_output=True),
        settings.repeats,
    )
    return [
        Row(
            "startup",
            "imports / command to first component",
            f"{imports:.1f} of {first_component_s:.1f} s",
            imports / first_component_s,
        ),
        Row(
            "startup",
            "`tpu-pipeline --help` / command to first component",
            f"{help_s:.2f} of {first_component_s:.1f} s",
            help_s / first_component_s,
        ),
    ]


# Synthetic runs through the whole pipeline: the sizes of MNIST's and CIFAR-10's training sets.
PIPELINE_RUNS = (("mnist", 60_000), ("cifar10", 50_000))


def pipeline_run_config(settings: Settings, dataset: DatasetConfig, count: int) -> pathlib.Path:
    """Synthetic records, their inferred schema and a run config; written once per size."""
    from tpu_pipeline.pipeline.data_tools.schema_tools import infer_schema, write_schema

    workdir = settings.workdir / f"pipeline-{dataset.name}-{count}"
    records = workdir / "data" / "train.tfrecord.gz"
    if not records.exists():
        data.write_examples(records, dataset, count)
    schema = workdir / "schema.pbtxt"
    if not schema.exists():
        write_schema(infer_schema(str(records)), schema)
    fields = dataset.model_dump(mode="json", include=set(DatasetConfig.model_fields) - {"source"})
    fields.update(
        name=f"bench-{dataset.name}",
        data_dir=str(records.parent),
        file_pattern="*.tfrecord.gz",
        schema_file=str(schema),
    )
    config = workdir / "config.yaml"
    # Random labels: nothing is learned or blessed, but every component does its full work.
    model = "mnist_cnn" if dataset.name == "mnist" else "cifar10_cnn"
    config.write_text(json.dumps({"dataset": fields, "trainer": {"model": model}}))
    return config


def bench_pipeline(settings: Settings) -> list[Row]:
    """MNIST- and CIFAR-sized synthetic runs end to end: time per component, and e2e / Trainer."""
    rows = []
    shapes = {"mnist": data.MNIST_SHAPED, "cifar10": data.CIFAR_SHAPED}
    for name, full_count in settings.first(PIPELINE_RUNS):
        count = full_count // settings.pipeline_divisor
        config = pipeline_run_config(settings, shapes[name], count)
        out = config.parent / "out"
        shutil.rmtree(out, ignore_errors=True)  # every component executes, none is cached
        summary = config.parent / "summary.json"
        run = run_measured(
            [
                *TPU_PIPELINE,
                "run",
                "--config",
                str(config),
                "--output-dir",
                str(out),
                "--summary-json",
                str(summary),
                *settings.run_flags(),
            ],
            config.parent / "run.log",
        )
        components = json.loads(summary.read_text())["components"]
        trainer_s = next(c["seconds"] for c in components if c["id"] == "Trainer")
        ratio = run["wall_s"] / trainer_s
        rows += [
            Row(
                "pipeline",
                f"{name}-shaped {count:,} images: whole command / Trainer",
                f"{run['wall_s']:.0f} vs {trainer_s:.0f} s",
                ratio,
                "<= 1.5",
                ratio <= 1.5,
            ),
            Row(
                "pipeline",
                f"{name}-shaped {count:,} images: seconds per component",
                ", ".join(
                    f"{c['id']} {c['seconds']:.0f}" for c in components if c["seconds"] >= 0.5
                ),
                None,
            ),
        ]
    return rows


# Beam's multi-process direct runner, one worker per CPU.
MULTI_PROCESS_ARGS = (
    "--direct_running_mode=multi_processing",
    f"--direct_num_workers={os.cpu_count()}",
)


def analyze_run(settings: Settings, dataset: DatasetConfig, count: int, beam_args=()) -> tuple:
    """(Statistics + Transform seconds, peak RSS GB) of `count` records, in a fresh process."""
    workdir = settings.workdir / f"scale-{dataset.name}-{count}"
    records = workdir / "data.tfrecord.gz"
    if not records.exists():
        data.write_examples(records, dataset, count)
    run = run_measured(
        [
            sys.executable,
            "-m",
            "benchmarks.data",
            dataset.name,
            str(records),
            str(workdir),
            *beam_args,
        ],
        workdir / "worker.log",
    )
    seconds = json.loads(next(line for _, line in reversed(run["lines"]) if line.startswith("{")))
    return seconds["statistics_s"] + seconds["transform_s"], run["peak_rss_gb"]


def _thousands(count: int) -> str:
    """10k for 10,000 records; a count under a thousand as it is."""
    return f"{count // 1000}k" if count >= 1000 else str(count)


def bench_scale(settings: Settings) -> list[Row]:
    """Transform + StatisticsGen seconds per record and peak memory as the data grows."""
    rows, largest = [], {}
    for dataset in settings.first((data.MNIST_SHAPED, data.CIFAR_SHAPED)):
        results = {count: analyze_run(settings, dataset, count) for count in settings.scale_sizes}
        largest[dataset.name] = results[max(results)][0]
        small, large = min(results), max(results)
        per_record = {n: s / n * 1e6 for n, (s, _) in results.items()}
        spread = max(per_record.values()) / min(per_record.values())
        detail = ", ".join(
            f"{_thousands(n)}: {per_record[n]:.0f} us/rec {results[n][1]:.2f} GB"
            for n in sorted(results)
        )
        growth = results[large][1] / results[small][1]
        name = f"{dataset.name}-shaped"
        rows += [
            Row("scale", f"{name} cost/record max / min", detail, spread, "<= 1.2", spread <= 1.2),
            Row(
                "scale",
                f"{name} peak RSS {_thousands(large)} / {_thousands(small)}",
                "",
                growth,
                "<= 1.2",
                growth <= 1.2,
            ),
        ]
    count = max(settings.scale_sizes)
    multi_s, _ = analyze_run(settings, data.MNIST_SHAPED, count, MULTI_PROCESS_ARGS)
    single_s = largest[data.MNIST_SHAPED.name]
    rows.append(
        Row(
            "scale",
            f"Beam multi-process ({os.cpu_count()} workers) / in-process, "
            f"mnist {_thousands(count)}",
            f"{multi_s:.1f} vs {single_s:.1f} s",
            multi_s / single_s,
        )
    )
    return rows


# An accelerator's appetite the host must feed, for the "cores per accelerator" figure:
# roughly one TPU v5e chip training ResNet-50 at 224x224 (an assumption, not a measurement).
ACCELERATOR_IMAGES_PER_S = 2000


def bench_photo_input(settings: Settings) -> list[Row]:
    """Photos at 224x224: the Trainer's decode, crop and flip vs tf.io.decode_jpeg alone."""
    import tensorflow_transform as tft

    from tpu_pipeline.components.training.augmentation import PHOTO_CROP_AREA, Augmentation

    workdir = settings.workdir / "photo-input"
    batch = 32
    count = max(2 * batch, 512 // settings.pipeline_divisor)
    dataset = data.photo_dataset((224, 224, 3))
    records = workdir / "train.tfrecord.gz"
    graph_dir = workdir / "transform"
    if not records.exists():
        photos = data.write_photo_folder(workdir / "photos", count)
        data.write_encoded_examples(records, photos, dataset.num_classes)
    if (graph_dir / "graph").exists():
        transform_output = tft.TFTransformOutput(str(graph_dir / "graph"))
    else:
        transform_output = data.build_transform_graph(str(records), dataset, graph_dir)
    trainer_ds = make_dataset(
        [str(records)],
        transform_output,
        dataset,
        batch,
        seed=TrainerConfig().seed,
        augmentation=Augmentation(flip=True, crop_area=PHOTO_CROP_AREA),
    )
    encoded = [
        tf.train.Example.FromString(record.numpy()).features.feature["image"].bytes_list.value[0]
        for record in tf.data.TFRecordDataset(str(records), compression_type="GZIP")
    ]
    decode_only = (
        tf.data.Dataset.from_tensor_slices(encoded)
        .repeat()
        .map(tf.io.decode_jpeg, tf.data.AUTOTUNE)
        .batch(1)  # photos differ in size; the count is what matters
        .prefetch(tf.data.AUTOTUNE)
    )
    batches = max(4, count // batch)
    work = {"trainer": drain(trainer_ds, batch, batches), "decode": drain(decode_only, 1, count)}
    for fn in work.values():  # traces and fills the trainer's cache
        fn()
    rates = interleaved_rates(work, settings.repeats)
    cores = os.cpu_count() or 1
    per_core = rates["trainer"] / cores
    return [
        _ratio_row(
            "photo_input",
            "224x224 decode + random crop + flip / tf.io.decode_jpeg alone (533x400 JPEGs)",
            rates,
            "trainer",
            "decode",
            "images/s",
            0.8,
        ),
        Row(
            "photo_input",
            f"host cores to feed {ACCELERATOR_IMAGES_PER_S:,} images/s (assumed accelerator rate)",
            f"{per_core:,.0f} images/s per core ({cores} cores)",
            ACCELERATOR_IMAGES_PER_S / per_core,
        ),
    ]


def _ingest(settings: Settings, kind: str, photos: pathlib.Path, side: int) -> dict:
    """One `benchmarks.ingest` run in its own process: its JSON line and its peak memory."""
    output = settings.workdir / f"ingest-{kind}-{side}"
    shutil.rmtree(output, ignore_errors=True)
    log = settings.workdir / f"ingest-{kind}-{side}.log"
    command = [sys.executable, "-m", "benchmarks.ingest", kind, str(photos), str(side), str(output)]
    measured = run_measured(command, log)
    result = json.loads(
        next(line for _, line in reversed(measured["lines"]) if line.startswith("{"))
    )
    return {**result, "peak_rss_gb": measured["peak_rss_gb"]}


# (format, synthetic shape, images): real shapes, a fifth of MNIST's and a tenth of CIFAR-10's.
PIXEL_SOURCES = (("idx", "mnist", 12_000), ("cifar10_binary", "cifar10", 6_000))


def bench_pixel_ingest(settings: Settings) -> list[Row]:
    """ExampleGen on IDX and CIFAR-10 binary: output / source bytes, pixels stored as bytes,
    against the same pixels read from an .npz, which ExampleGen stores as floats (as it
    stored IDX and CIFAR-10 before issue 18)."""
    from benchmarks.ingest import example_gen
    from tpu_pipeline.cli.synthetic_data import SHAPES, synthetic_dataset, write_synthetic
    from tpu_pipeline.components.example_gen.formats import FORMATS

    rows = []
    for data_format, shape, count in settings.first(PIXEL_SOURCES):
        count //= settings.pipeline_divisor
        sizes = {}
        for stored_as in (data_format, "npz"):
            raw = settings.workdir / f"pixels-{shape}-{count}-{stored_as}"
            if not raw.exists():
                write_synthetic(raw, stored_as, count, shape, count // 6, seed=0)
            dataset = synthetic_dataset(stored_as, shape)
            output = settings.workdir / f"pixel-ingest-{stored_as}-{shape}"
            shutil.rmtree(output, ignore_errors=True)
            example_gen(dataset, raw, FORMATS[stored_as].default_pattern, output)
            sizes[stored_as] = sum(path.stat().st_size for path in output.rglob("*.gz"))
        # The source's pixels and labels, uncompressed: one byte each (the IDX files are gzipped).
        source = count * (1 + int(np.prod(SHAPES[shape])))
        ratio = sizes[data_format] / source
        rows += [
            Row(
                "pixel_ingest",
                f"ExampleGen on {data_format} ({count:,} {shape}): output / source bytes",
                f"{sizes[data_format] / 1e6:.1f} vs {source / 1e6:.1f} MB",
                ratio,
                "<= 1.1",
                ratio <= 1.1,
            ),
            Row(
                "pixel_ingest",
                f"the same pixels stored as floats (from .npz) / as bytes ({data_format})",
                f"{sizes['npz'] / 1e6:.1f} vs {sizes[data_format] / 1e6:.1f} MB",
                sizes["npz"] / sizes[data_format],
            ),
        ]
    return rows


def bench_photo_ingest(settings: Settings) -> list[Row]:
    """ExampleGen on 533x400 JPEGs at 96 and 224 vs the floor, and at twice the photos."""
    count = max(10, 1000 // settings.pipeline_divisor)
    photos = settings.workdir / f"ingest-photos-{count}"
    doubled = settings.workdir / f"ingest-photos-{2 * count}"
    if not photos.exists():
        data.write_photo_folder(photos, count)
    if not doubled.exists():
        data.write_photo_folder(doubled, 2 * count)
    runs = {
        "floor": _ingest(settings, "floor", photos, 96),
        "96": _ingest(settings, "example_gen", photos, 96),
        "224": _ingest(settings, "example_gen", photos, 224),
        "224 x2": _ingest(settings, "example_gen", doubled, 224),
    }
    ms = {name: 1e3 * run["seconds"] / run["images"] for name, run in runs.items()}
    rows = []
    for name in ("96", "224"):
        run = runs[name]
        rows.append(
            Row(
                "photo_ingest",
                f"ExampleGen at {name}x{name}: time per photo / the floor's",
                f"{ms[name]:.2f} vs {ms['floor']:.2f} ms per photo",
                ms[name] / ms["floor"],
                "<= 3",
                ms[name] / ms["floor"] <= 3,
            )
        )
        ratio = run["output_bytes"] / run["source_bytes"]
        rows.append(
            Row(
                "photo_ingest",
                f"ExampleGen at {name}x{name}: output bytes / the JPEGs' bytes",
                f"{run['output_bytes'] / 1e6:.1f} vs {run['source_bytes'] / 1e6:.1f} MB",
                ratio,
                "<= 1.1",
                ratio <= 1.1,
            )
        )
    rows.append(
        Row(
            "photo_ingest",
            "ExampleGen at 224: time per photo at 224 / at 96",
            f"{ms['224']:.2f} vs {ms['96']:.2f} ms per photo",
            ms["224"] / ms["96"],
        )
    )
    memory_growth = runs["224 x2"]["peak_rss_gb"] / runs["224"]["peak_rss_gb"]
    rows.append(
        Row(
            "photo_ingest",
            f"ExampleGen peak memory, {2 * count:,} / {count:,} photos "
            f"(floor {runs['floor']['peak_rss_gb']:.2f} GB)",
            f"{runs['224 x2']['peak_rss_gb']:.2f} vs {runs['224']['peak_rss_gb']:.2f} GB",
            memory_growth,
            "<= 1.1",
            memory_growth <= 1.1,
        )
    )
    return rows


def photo_folder_dataset(
    name: str, photos: pathlib.Path, side: int, label_names: list[str], schema: pathlib.Path
) -> dict:
    """The `dataset:` section for a folder of `train/<class>/` and `validation/<class>/` photos."""
    return {
        "name": name,
        "data_dir": str(photos),
        "format": "image_folder",
        "split_patterns": {"train": "train/*/*", "eval": "validation/*/*"},
        "image_shape": [side, side, 3],
        "pixel_feature": "image",
        "label_feature": "label",
        "num_classes": len(label_names),
        "schema_file": str(schema),
        "source": {"resize": True, "label_names": label_names},
    }


def bench_photo_pipeline(settings: Settings) -> list[Row]:
    """The whole pipeline on a photo folder vs a plain Keras script: same network and epochs."""
    count = max(20, 2000 // settings.pipeline_divisor)  # 10 classes: two photos each at least
    side, epochs = settings.photo_side, settings.epochs or 10
    photos = settings.photos or settings.workdir / f"pipeline-photos-{count}"
    if settings.photos is None and not photos.exists():
        # Synthetic classes differ by scale, which random crops blur: real photos are fairer.
        data.write_photo_folder(photos / "train", count, seed=0)
        data.write_photo_folder(photos / "validation", count // 5, seed=1)
    names = sorted(path.name for path in (photos / "train").iterdir() if path.is_dir())
    count = sum(1 for _ in (photos / "train").glob("*/*"))
    config = settings.workdir / f"photos-{count}.yaml"
    config.write_text(
        json.dumps(
            {
                "output_dir": str(settings.workdir / f"photo-runs-{count}"),
                "dataset": photo_folder_dataset(
                    "bench-photos",
                    photos,
                    side,
                    names,
                    settings.workdir / f"photos-{photos.name}-schema.pbtxt",
                ),
                "trainer": {"model": "resnet20", "epochs": epochs},
                "evaluator": {"accuracy_lower_bound": 0.0},
                "serving": {"tflite_variants": []},
                "enable_cache": False,
            }
        )
    )
    summary = settings.workdir / f"photos-{count}-summary.json"
    ours = run_measured(
        [
            *TPU_PIPELINE,
            "run",
            "--config",
            str(config),
            "--summary-json",
            str(summary),
            *settings.run_flags(),
        ],
        settings.workdir / "photo-pipeline.log",
    )
    accuracy = json.loads(summary.read_text())["metrics"]["accuracy"]
    plain = run_measured(
        [
            sys.executable,
            "-m",
            "benchmarks.keras_photos",
            str(photos),
            str(side),
            str(epochs),
            "resnet20",
        ],
        settings.workdir / "photo-keras.log",
    )
    script = json.loads(next(line for _, line in reversed(plain["lines"]) if line.startswith("{")))
    figure = f"{count:,} photos at {side}x{side}, resnet20, {epochs} epochs"
    return [
        Row(
            "photo_pipeline",
            f"pipeline wall time / plain Keras script's, {figure}",
            f"{ours['wall_s']:.0f} vs {plain['wall_s']:.0f} s",
            ours["wall_s"] / plain["wall_s"],
            "<= 1.2",
            ours["wall_s"] / plain["wall_s"] <= 1.2,
        ),
        Row(
            "photo_pipeline",
            "eval accuracy: pipeline (crop + flip) minus plain script (none)",
            f"{accuracy:.3f} vs {script['accuracy']:.3f}",
            accuracy - script["accuracy"],
            ">= 0.05",
            accuracy - script["accuracy"] >= 0.05,
        ),
    ]


# The photo run of issue 28: 224x224 photos, cnn_bn, batch 16, 20 training steps; the eval
# split at 1x and 3x (about 20% and 43% of the photos), the training split the same.
PHOTO_MEMORY_TRAIN, PHOTO_MEMORY_EVAL = 2727, 682
PHOTO_MEMORY_PEAK_GB = 4.0


def bench_photo_memory(settings: Settings) -> list[Row]:
    """Whole-run peak memory of a 224x224 photo run, and whether it grows with the eval split."""
    full_size = settings.pipeline_divisor == 1
    train = max(16, PHOTO_MEMORY_TRAIN // settings.pipeline_divisor)  # a batch at least
    side = settings.memory_photo_side
    peaks = {}
    for multiple in (1, 3):
        evaluated = max(10, PHOTO_MEMORY_EVAL // settings.pipeline_divisor) * multiple
        photos = settings.workdir / f"memory-photos-{train}-{evaluated}"
        if not photos.exists():
            data.write_photo_folder(photos / "train", train, seed=0)
            data.write_photo_folder(photos / "validation", evaluated, seed=1)
        config = settings.workdir / f"{photos.name}.yaml"
        config.write_text(
            json.dumps(
                {
                    "output_dir": str(settings.workdir / f"{photos.name}-runs"),
                    "dataset": photo_folder_dataset(
                        photos.name,
                        photos,
                        side,
                        data.photo_class_names(10),
                        settings.workdir / f"{photos.name}-schema.pbtxt",
                    ),
                    "trainer": {
                        "model": "cnn_bn",
                        "per_replica_batch_size": 16,
                        "train_steps": 20,
                        "epochs": 1,
                    },
                    "evaluator": {"accuracy_lower_bound": 0.0},
                    "enable_cache": False,
                }
            )
        )
        run = run_measured(
            [*TPU_PIPELINE, "run", "--config", str(config), *settings.run_flags()],
            settings.workdir / f"{photos.name}.log",
        )
        peaks[multiple] = (evaluated, run["peak_rss_gb"])
    (small, small_peak), (large, large_peak) = peaks[1], peaks[3]
    figure = f"{train:,} training photos at {side}x{side}, cnn_bn"
    rows = [
        Row(
            "photo_memory",
            f"whole-run peak RSS, eval {large:,} / {small:,} photos, {figure}",
            f"{large_peak:.2f} vs {small_peak:.2f} GB",
            large_peak / small_peak,
            "<= 1.1",
            large_peak / small_peak <= 1.1,
        )
    ]
    if full_size:  # the 4 GB target is for the full-size run
        rows.append(
            Row(
                "photo_memory",
                f"whole-run peak RSS / {PHOTO_MEMORY_PEAK_GB:g} GB, eval {small:,} photos",
                f"{small_peak:.2f} GB",
                small_peak / PHOTO_MEMORY_PEAK_GB,
                "< 1",
                small_peak < PHOTO_MEMORY_PEAK_GB,
            )
        )
    return rows


# Dataset -> training steps of the model, copies of its files predicted on, their pattern.
# Enough records that the job runs about half a minute, as a batch job runs minutes, so
# its start-up (Beam, loading the model: 0.7-2 s) is a small part of its time; the
# start-up has its own row.
PREDICT_DATA = {
    "digits": (100, 1000, "copy-*/*.tfrecord"),
    "signs": (20, 60, "copy-*/*/*/*.JPG"),
}


def _pushed_model(settings: Settings, dataset: str) -> pathlib.Path:
    """A run folder with a pushed model of `dataset`, trained briefly (its rate is the point)."""
    output = settings.workdir / "predict-runs"
    run_dir = output / f"tpu-pipeline-{dataset}"
    if not any((run_dir / "serving_model").glob("[0-9]*")):
        run_measured(
            [
                *TPU_PIPELINE,
                "run",
                "--dataset",
                dataset,
                "--output-dir",
                str(output),
                "--train-steps",
                str(PREDICT_DATA[dataset][0]),
                "--set",
                "evaluator.accuracy_lower_bound=0",
                "--set",
                "serving.tflite_variants=[]",
                # The sections that read the run time their own attributions.
                "--set",
                "explain.mistakes=0",
                "--set",
                "explain.correct_per_class=0",
                *settings.run_flags(),
            ],
            settings.workdir / f"predict-train-{dataset}.log",
        )
    return run_dir


def bench_predict(settings: Settings, dataset_name: str = "digits") -> list[Row]:
    """`tpu-pipeline predict`'s Beam job vs the SavedModel's own batches of the same records.

    The job's rate is its whole wall time (pipeline set-up, model load, reading and
    checking every file, writing the CSV); the SavedModel's is `serving_default` on
    the same serialized examples, already in memory, in the same batches.
    """
    from tpu_pipeline.common.config import load_config
    from tpu_pipeline.components.example_gen.examples import ExampleBuilder
    from tpu_pipeline.components.example_gen.formats import source_format
    from tpu_pipeline.components.serving.export import SERVING_INPUT_KEY, SERVING_SIGNATURE
    from tpu_pipeline.pipeline.batch_predict import run_batch_predictions
    from tpu_pipeline.pipeline.batch_predict.job import input_files
    from tpu_pipeline.pipeline.batch_predict.model_path import resolve_model_version

    run_dir = _pushed_model(settings, dataset_name)
    dataset = load_config(None, {"dataset": dataset_name}).dataset
    source = dataset.data_dir or str(run_dir / "data" / dataset_name)
    _, copies, pattern = PREDICT_DATA[dataset_name]
    copies = settings.predict_copies or copies
    data_dir = settings.workdir / f"predict-data-{dataset_name}-{copies}"
    if not data_dir.exists():
        for copy in range(copies):
            shutil.copytree(source, data_dir / f"copy-{copy}")
    files = [
        f for copy in range(copies) for f in input_files(dataset, str(data_dir / f"copy-{copy}"))
    ]
    builder = ExampleBuilder(dataset, labels_required=False)
    examples = [
        example.SerializeToString()
        for path in files
        for _, example in source_format(dataset).read(path, builder)
    ]
    batch = 256
    serve = tf.saved_model.load(resolve_model_version(str(run_dir))).signatures[SERVING_SIGNATURE]
    batches = [tf.constant(examples[i : i + batch]) for i in range(0, len(examples), batch)]

    def saved_model() -> float:
        started = time.perf_counter()
        for examples_batch in batches:
            serve(**{SERVING_INPUT_KEY: examples_batch})["probabilities"].numpy()
        return len(examples) / (time.perf_counter() - started)

    def beam_job() -> float:
        started = time.perf_counter()
        result = run_batch_predictions(
            str(run_dir),
            dataset,
            str(data_dir),
            str(settings.workdir / f"predictions-{dataset_name}.csv"),
            pattern=pattern,
            batch_size=batch,
        )
        assert result.predictions == len(examples), result
        return result.predictions / (time.perf_counter() - started)

    def one_file_job() -> float:
        """Seconds for the job on the first file alone, where it sits in its copy's layout."""
        first = pathlib.Path(files[0]).relative_to(data_dir / "copy-0")
        single = settings.workdir / f"predict-one-file-{dataset_name}"
        (single / first).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(files[0], single / first)
        started = time.perf_counter()
        run_batch_predictions(
            str(run_dir),
            dataset,
            str(single),
            str(settings.workdir / f"predictions-one-file-{dataset_name}.csv"),
            pattern=str(first),
        )
        return time.perf_counter() - started

    saved_model()  # traces the signature
    rates = interleaved_rates({"beam": beam_job, "saved_model": saved_model}, settings.repeats)
    return [
        _ratio_row(
            "predict",
            f"`predict` Beam job / SavedModel batches, {dataset_name}, {len(examples):,} records",
            rates,
            "beam",
            "saved_model",
            "predictions/s",
            0.7,
        ),
        Row(
            "predict",
            f"`predict` start-up: a job on one file of {dataset_name} (set-up, model load, write)",
            f"{one_file_job():.1f} s",
            None,
        ),
    ]


def bench_evaluator_slices(settings: Settings) -> list[Row]:
    """The Evaluator with every slice against the whole split alone, digits and photos."""
    rows = []
    for dataset in settings.first(("digits", "signs")):
        run_dir = _pushed_model(settings, dataset)
        seconds = evaluator_slices.slice_seconds(run_dir.parent, dataset, settings.repeats)
        rows.append(
            Row(
                "evaluator_slices",
                f"Evaluator with slices / whole split only, {dataset} "
                "(class; photos also format and size)",
                f"{seconds['sliced']:.2f} s vs {seconds['whole']:.2f} s",
                seconds["sliced"] / seconds["whole"],
            )
        )
    return rows


def bench_attributions(settings: Settings) -> list[Row]:
    """The Trainer's attribution step on a digits and a photo model (benchmarks/attributions.py)."""
    rows = []
    for dataset, methods in settings.first(
        [("digits", ("integrated_gradients",)), ("signs", ("xrai", "integrated_gradients"))]
    ):
        run_dir = _pushed_model(settings, dataset)
        timed = attributions.step_seconds(run_dir.parent, dataset, settings.repeats, methods)
        default = timed[methods[0]]
        rows.append(
            Row(
                "attributions",
                f"attribution step, {dataset} ({default['side']} px), {methods[0]}, "
                f"{default['images']} images, 32 steps",
                f"{default['step']:.1f} s ({default['maps'] / max(default['images'], 1):.2f} s "
                "an image mapped)",
                None,
            )
        )
        if len(methods) > 1:
            other = timed[methods[1]]
            rows.append(
                Row(
                    "attributions",
                    f"{methods[0]} / {methods[1]} maps, {dataset}, same images",
                    f"{default['maps']:.1f} s vs {other['maps']:.1f} s",
                    default["maps"] / other["maps"],
                )
            )
    return rows


def bench_model_card(settings: Settings) -> list[Row]:
    """The Pusher's model card on a digits and a photo run (benchmarks/model_card.py)."""
    timed = {
        dataset: model_card.card_seconds(
            _pushed_model(settings, dataset).parent, dataset, settings.repeats
        )
        for dataset in settings.first(("digits", "signs"))
    }
    return [
        Row(
            "model_card",
            f"model card, {dataset} ({t['metrics']} metrics), made and written",
            f"{t['seconds']:.2f} s",
            None,
        )
        for dataset, t in timed.items()
    ]


def bench_runs(settings: Settings) -> list[Row]:
    """`tpu-pipeline runs` and `runs diff` on three runs, and logging a run to MLflow
    (benchmarks/runs_history.py)."""
    run_dir = runs_history.three_runs(settings.workdir, settings.run_flags())
    rows = []
    for args, figure in (
        (["runs", str(run_dir)], "`runs` on 3 runs, whole command"),
        (["runs", str(run_dir), "diff"], "`runs diff` of the 2 newest, whole command"),
    ):
        timed = runs_history.command_seconds(args, settings.repeats)
        rows.append(
            Row(
                "runs",
                f"{figure} (CPU {timed['cpu_s']:.2f} s, TensorFlow "
                f"{'imported' if timed['tensorflow'] else 'not imported'})",
                f"{timed['wall_s']:.2f} s",
                None,
                "< 1 s, no TensorFlow",
                timed["wall_s"] < 1.0 and not timed["tensorflow"],
            )
        )
    tracked = runs_history.tracking_seconds(run_dir, settings.workdir)
    registered = ", model registered" if tracked["registered"] else ""
    rows.append(
        Row(
            "runs",
            f"logging the newest run to a local MLflow server{registered}",
            f"{tracked['seconds']:.1f} s",
            None,
        )
    )
    return rows


def bench_pruning(settings: Settings) -> list[Row]:
    """What trainer.pruning costs in accuracy and saves in gzipped size (benchmarks/pruning.py)."""
    return pruning.rows(Row, settings.first(pruning.DATASETS), settings.epochs)


# --- Preflight memory estimate -----------------------------------------------------------

# Image sides the preflight's Trainer estimate is checked at, and the two batch sizes whose
# difference gives the growth per example (one process per model and side).
PREFLIGHT_SIDES = (32, 224)
PREFLIGHT_BATCHES = (4, 8)
PREFLIGHT_STEPS = 2


def _mib(size: int) -> str:
    return f"{size / 2**20:,.0f} MiB"


def preflight_memory_rows(result: dict) -> list[Row]:
    """Rows of one `benchmarks.trainer_memory` result: the estimate over the measured peak at the
    larger batch, and over the measured growth per example between the two batches."""
    small, large = result["batches"]
    figure = f"{result['model']} {result['side']}x{result['side']}"
    total, measured = large["estimate"]["total"], large["measured"]
    per_example = (large["estimate"]["activations"] - small["estimate"]["activations"]) / (
        large["batch"] - small["batch"]
    )
    measured_per_example = (large["measured"] - small["measured"]) / (
        large["batch"] - small["batch"]
    )
    rows = [
        Row(
            "preflight_memory",
            f"estimate / measured Trainer step, {figure} batch {large['batch']}",
            f"{_mib(total)} vs {_mib(measured)}",
            total / measured,
        )
    ]
    if measured_per_example > 0:  # a model too small to move the peak has no growth to compare
        rows.append(
            Row(
                "preflight_memory",
                f"estimate / measured per example, {figure}",
                f"{per_example / 2**20:,.2f} vs {measured_per_example / 2**20:,.2f} MiB",
                per_example / measured_per_example,
            )
        )
    return rows


def bench_preflight_memory(settings: Settings) -> list[Row]:
    """The preflight's Trainer memory estimate against the measured step, every built-in model."""
    rows = []
    for name, side in settings.first(
        (name, side) for name in MODEL_BUILDERS for side in PREFLIGHT_SIDES
    ):
        command = [
            sys.executable,
            "-m",
            "benchmarks.trainer_memory",
            name,
            str(side),
            str(PREFLIGHT_STEPS),
            *map(str, PREFLIGHT_BATCHES),
        ]
        done = subprocess.run(command, capture_output=True, text=True, cwd=REPO_ROOT)
        if done.returncode:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            rows.append(Row("preflight_memory", f"FAILED {name} {side}: {last}", "", None))
            continue
        result = json.loads(done.stdout.strip().splitlines()[-1])
        print(json.dumps(result), file=sys.stderr, flush=True)
        rows += preflight_memory_rows(result)
    return rows


SECTIONS: dict[str, Callable[[Settings], list[Row]]] = {
    "trainer": bench_trainer,
    "xla": bench_xla,
    "spe": bench_steps_per_execution,
    "trainer_vs_fit": bench_trainer_vs_fit,
    "cpu_precision": bench_cpu_precision,
    "efficiency": bench_efficiency,
    "cifar_recipe": bench_cifar_recipe,
    "e2e": bench_e2e,
    "pipeline": bench_pipeline,
    "scale": bench_scale,
    "photo_input": bench_photo_input,
    "photo_ingest": bench_photo_ingest,
    "pixel_ingest": bench_pixel_ingest,
    "photo_pipeline": bench_photo_pipeline,
    "photo_memory": bench_photo_memory,
    "predict": bench_predict,
    "predict_photos": lambda settings: bench_predict(settings, "signs"),
    "pruning": bench_pruning,
    "evaluator_slices": bench_evaluator_slices,
    "attributions": bench_attributions,
    "model_card": bench_model_card,
    "runs": bench_runs,
    "preflight_memory": bench_preflight_memory,
}


def machine_lines(settings: Settings, sections: list[str]) -> list[str]:
    import apache_beam
    import tfx.version

    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in open("/proc/cpuinfo")
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return [
        f"machine: {cpu}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}",
        f"versions: Python {platform.python_version()}, TensorFlow {tf.__version__}, "
        f"TFX {tfx.version.__version__}, Beam {apache_beam.__version__}",
        f"sizes: {settings.steps} steps x batch {settings.batch} "
        f"(large batch {settings.large_batch}), median of {settings.repeats} repeats, "
        f"scale {', '.join(f'{n:,}' for n in settings.scale_sizes)} records",
        f"sections: {', '.join(sections)}",
    ]


def format_table(rows: list[Row]) -> str:
    header = ("section", "figure", "measured", "ratio", "target", "met")
    cells = [
        (
            r.section,
            r.figure,
            r.measured,
            "" if r.ratio is None else f"{r.ratio:.2f}",
            r.target,
            "" if r.met is None else ("yes" if r.met else "NO"),
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in [header, *cells]) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in [header, *cells]
    )


# Without --workdir: the data and runs go to a work folder removed when the bench ends, or
# by the next bench if this one was killed.
WORK_DIRS = WorkDirs("bench", "benchmark's work folder")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--only", help=f"comma-separated sections: {', '.join(SECTIONS)} (default: all)"
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument(
        "--quick",
        action="store_true",
        help="fewer repeats and steps, smaller scale sizes, pipeline runs at 1/10 size",
    )
    size.add_argument(
        "--smoke",
        action="store_true",
        help="the least that runs each section end to end (what the test suite runs); "
        "its figures mean nothing",
    )
    parser.add_argument(
        "--workdir", type=pathlib.Path, help="keep data and runs here (default: a temp folder)"
    )
    parser.add_argument(
        "--photos",
        type=pathlib.Path,
        help="photo_pipeline: a folder of real photos, train/<class>/ and validation/<class>/ "
        "(default: synthetic photos)",
    )
    parser.add_argument(
        "--cifar-dir",
        type=pathlib.Path,
        help="cifar_recipe: CIFAR-10 as train/<class>/*.jpg and test/<class>/*.jpg "
        "(default: synthetic photos of its shape)",
    )
    parser.add_argument(
        "--scale-sizes",
        help="comma-separated record counts for the scale section, e.g. 10000,100000",
    )
    args = parser.parse_args(argv)
    sections = args.only.split(",") if args.only else list(SECTIONS)
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; allowed: {', '.join(SECTIONS)}")
    if args.workdir is None:  # removed at the end; a killed bench's, by the next bench
        with WORK_DIRS.owned() as workdir:
            return _run_sections(args, sections, workdir)
    try:
        # Sections clear their own sub-folders (e2e-ours, a training's run folder) before
        # they run: a folder the user named must be new, empty or the bench's own before.
        claim_folder(args.workdir, "--workdir")
    except UserPathError as error:
        parser.error(str(error))
    return _run_sections(args, sections, args.workdir)


def _run_sections(args: argparse.Namespace, sections: list[str], workdir: pathlib.Path) -> int:
    """Runs `sections` in `workdir` at the size `args` asks and prints their table."""
    settings = sized(
        "quick" if args.quick else "smoke" if args.smoke else "full",
        workdir,
        photos=args.photos,
        cifar=args.cifar_dir,
    )
    if args.scale_sizes:
        sizes = tuple(int(n) for n in args.scale_sizes.split(","))
        settings = dataclasses.replace(settings, scale_sizes=sizes)
    skip_autograph_for_graph_safe_code()
    rows = []
    for name in sections:
        started = time.perf_counter()
        try:
            rows += SECTIONS[name](settings)
        except Exception as error:  # one broken section must not lose the others' figures
            rows.append(Row(name, f"FAILED: {type(error).__name__}: {error}", "", None))
        print(
            f"[bench] {name} done in {time.perf_counter() - started:.0f} s",
            file=sys.stderr,
            flush=True,
        )
    print("\n".join(machine_lines(settings, sections)))
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
