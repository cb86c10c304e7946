"""Shared test set-up: Keras 2 before TensorFlow loads, real data, one real pipeline run."""

from __future__ import annotations

import io
import json
import os
import pathlib
import pickle
import shutil
import subprocess
import sys

import pytest

from tpu_pipeline import common  # noqa: F401 (sets TF_USE_LEGACY_KERAS before any test imports TensorFlow)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# XLA:CPU without LLVM's optimisations: the same HLO passes (every test passes), compiled
# 7x faster (MobileNetV2's bfloat16 step: 40 s -> 6 s), so every test that compiles a
# step with XLA pays seconds rather than a minute. Tests check what XLA compiles and runs,
# not how fast the CPU code is (a TPU's compiler is another backend); `make run` and the
# benchmarks compile with XLA's defaults. Child processes inherit it.
_XLA_CPU_UNOPTIMISED = "--xla_backend_optimization_level=0"
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_XLA_CPU_UNOPTIMISED}".strip()

from tests.gcs_emulator import gcs_bucket, gcs_server  # noqa: E402, F401 (fixtures)
from tpu_pipeline.common.config import BUILTIN_DATA_DIR, PipelineConfig, load_config  # noqa: E402
from tpu_pipeline.common.file_lock import held_lock  # noqa: E402

MNIST_TFRECORD = BUILTIN_DATA_DIR / "mnist" / "mnist.tfrecord.gz"


@pytest.fixture(autouse=True)
def _absl_logger_level_restored():
    """A command run in the test's process (`serving` quiets absl's logger for good, as a
    process of its own may) leaves the level as it found it: the exit handler's tests read
    its absl warnings, and failed when they ran after a `serving` command."""
    import logging

    absl = logging.getLogger("absl")
    level = absl.level
    yield
    absl.setLevel(level)


def pytest_configure(config: pytest.Config) -> None:
    """Keeps the order below under `--dist loadscope`.

    pytest-xdist (3.6 and newer) otherwise sends modules out by their number of tests,
    most first, which put the one-test modules that run a whole pipeline or a long
    training last: one worker ran them alone at the end while the other had finished.
    """
    if hasattr(config.option, "loadscopereorder"):  # only where pytest-xdist is loaded
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules holding a `slow` test run first, every module's tests kept together in order.

    Under `--dist loadscope` a worker takes the next module when it finishes one, in
    this order: the long real runs start first and the unit-test modules fill in at the
    end, instead of one worker finishing a long run alone while the other idles.
    """
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)


@pytest.fixture(scope="session")
def mnist_tfrecord() -> pathlib.Path:
    """The 1,000 real MNIST examples the repository ships, gzipped (read-only)."""
    assert MNIST_TFRECORD.exists(), f"missing built-in data: {MNIST_TFRECORD}"
    return MNIST_TFRECORD


# 300 steps in 3 epochs, not the default 15: each epoch ends with a validation pass and
# its callbacks, and 15 of them cost 2.5 s more of a run than 3 (accuracy 0.991 either way).
SMALL_DIGITS_TRAINING = {"trainer.train_steps": 300, "trainer.epochs": 3}


def small_digits_config(output_dir: pathlib.Path, **overrides) -> PipelineConfig:
    """The default digits pipeline, trained briefly enough for tests yet above 0.95 accuracy."""
    return load_config(None, {"output_dir": str(output_dir), **SMALL_DIGITS_TRAINING, **overrides})


def once_per_session(tmp_path_factory, name: str, make):
    """make(folder)'s result, made once per test session and read by every test that asks.

    Under pytest-xdist (`make test PYTEST_ARGS="-n 2"`) the first worker that needs it
    makes it in the session's folder and the others wait for it and read the same result:
    one run per session, not one per worker. The result must pickle.
    """
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the session's folder, above every worker's own
    done = root / f"{name}.pickle"
    with held_lock(root / f"{name}.lock", f"the shared {name}", wait_seconds=None):
        if not done.exists():
            done.write_bytes(pickle.dumps(make(root / name)))
    return pickle.loads(done.read_bytes())


@pytest.fixture(scope="session")
def digits_run(tmp_path_factory):
    """One real local run of the whole digits pipeline, shared by the tests that read it.

    Returns (config, summary). Tests must not change its outputs; a test that
    needs a second run makes its own copy or its own run.
    """

    def run(folder: pathlib.Path):
        from tpu_pipeline.pipeline.local.runner import run_local

        config = small_digits_config(folder)
        return config, run_local(config, io.StringIO())

    config, summary = once_per_session(tmp_path_factory, "digits-run", run)
    assert summary.succeeded, summary.error  # a failed run fails every worker, run once
    return config, summary


# The README's worked photo example, as a user types it (tests/cli/test_photos_e2e.py).
SIGNS_README_COMMAND = ".venv/bin/tpu-pipeline run --dataset signs --summary-json signs.json"
# The surest mistakes the signs run explains with XRAI (~2.5 s a photo here).
SIGNS_EXPLAINED_MISTAKES = 3


@pytest.fixture(scope="session")
def signs_run(tmp_path_factory):
    """The README's photo command on the shipped hand photos, shortened: one real run shared
    (read only) by the photo tests and the benchmark smoke's `predict_photos`.

    Returns (exit code, the summary JSON, the run's configuration).
    """

    def run(out: pathlib.Path):
        from tpu_pipeline.cli.main import main
        from tpu_pipeline.components import imagenet_files

        out.mkdir(parents=True)
        summary_path = out / "summary.json"
        command = SIGNS_README_COMMAND.split()[2:]
        command[command.index("--summary-json") + 1] = str(summary_path)
        # Shorter than the README's 30 epochs, and the offline recipe wherever the tests run.
        settings = [
            "--output-dir",
            str(out),
            "--train-steps",
            "30",
            "--set",
            "evaluator.accuracy_lower_bound=0",
            "--set",
            "serving.tflite_variants=[float32]",
            "--set",
            f"explain.mistakes={SIGNS_EXPLAINED_MISTAKES}",
            "--set",
            "explain.correct_per_class=0",
        ]
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(imagenet_files, "is_available", lambda weights: False)
            code = main(["run", *command, *settings])
        config = load_config(
            None, {"dataset": "signs", "output_dir": str(out), "trainer.train_steps": 30}
        )
        return code, json.loads(summary_path.read_text()), config

    return once_per_session(tmp_path_factory, "signs-run", run)


# The two digits runs after the session's first in `three_digits_runs`: each may lose a
# little accuracy against the first and still be blessed.
LATER_DIGITS_RUNS = {"serving.tflite_variants": [], "evaluator.max_accuracy_drop": 0.05}
# The refused run's training: one step an epoch, too few for 0.9 on any CPU (40 steps were
# blessed on an Intel Xeon with AMX, whose kernels round otherwise: 0.9+ in 40 steps).
SHORT_DIGITS_TRAIN_STEPS = 3


@pytest.fixture(scope="session")
def three_digits_runs(digits_run, tmp_path_factory):
    """A run folder of three real runs, shared (read only) by the `runs` command's tests and
    the benchmark smoke's `runs`: the session's digits run (copied, so it stays as it was),
    then a run trained far shorter (refused) and one trained as the first (blessed, pushed
    as a new version), each reported as `tpu-pipeline run` reports it.

    Returns (run folder, output folder, the three summaries, oldest first).
    """
    config, first = digits_run

    def make(root: pathlib.Path):
        from tpu_pipeline.pipeline.local.runner import run_local
        from tpu_pipeline.pipeline.report import write_report

        run_dir = root / config.run_dir.name
        shutil.copytree(config.run_dir, run_dir)

        def run(**overrides):
            run_config = small_digits_config(root, **LATER_DIGITS_RUNS, **overrides)
            summary = run_local(run_config, io.StringIO())
            assert summary.succeeded, summary.error
            write_report(run_config.run_dir, summary, run_config)
            return summary

        short = run(**{"trainer.train_steps": SHORT_DIGITS_TRAIN_STEPS})
        again = run()
        assert not short.blessed and again.blessed and again.push_note == "new version"
        return run_dir, root, [short, again]

    run_dir, root, later = once_per_session(tmp_path_factory, "three-digits-runs", make)
    return run_dir, root, [first, *later]


def run_cli(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """`tpu-pipeline ARGS` in a child process, as a user runs it; output captured."""
    return subprocess.run(
        [sys.executable, "-m", "tpu_pipeline.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "TF_USE_LEGACY_KERAS": "0"},  # the CLI must force Keras 2 itself
    )


def write_bad_digits(path) -> None:
    """Real digits of which some images drifted to a 0-256 pixel scale (outside the schema's
    0-16): each record is well formed, so only the statistics show it. (A label outside
    the classes is refused earlier, by ExampleGen, naming the record.)"""
    import tensorflow as tf  # imported here: a conftest's imports are paid by every collection
    from sklearn.datasets import load_digits

    digits = load_digits()
    with tf.io.TFRecordWriter(str(path)) as writer:
        for index, (pixels, label) in enumerate(zip(digits.data, digits.target, strict=True)):
            scale = 16 if index % 10 == 5 else 1
            features = {
                "pixels": tf.train.Feature(float_list=tf.train.FloatList(value=pixels * scale)),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
            }
            writer.write(
                tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()
            )


@pytest.fixture(scope="session")
def rejected_cli_run(tmp_path_factory):
    """`tpu-pipeline run` as a user runs it, on digits that break the schema (rejected by DataGate).

    Returns (the finished process, its --summary-json path, its output folder). Shared by
    the tests of the command's output and of the rejected run's report: one run, read only.
    """

    def run(root: pathlib.Path):
        (root / "bad").mkdir(parents=True)
        write_bad_digits(root / "bad" / "digits.tfrecord")
        summary_path = root / "summary.json"
        result = run_cli(
            "run",
            "--data-dir",
            str(root / "bad"),
            "--output-dir",
            str(root / "out"),
            "--summary-json",
            str(summary_path),
        )
        return result, summary_path, root / "out"

    return once_per_session(tmp_path_factory, "rejected-run", run)
