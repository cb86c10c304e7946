"""Shared test set-up: Keras 2 before TensorFlow loads, real data, one real pipeline run."""

from __future__ import annotations

import io
import os
import pathlib
import pickle

import pytest

import common  # noqa: F401 (sets TF_USE_LEGACY_KERAS before any test imports TensorFlow)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from common.config import BUILTIN_DATA_DIR, PipelineConfig, load_config  # noqa: E402
from common.file_lock import held_lock  # noqa: E402

MNIST_TFRECORD = BUILTIN_DATA_DIR / "mnist" / "mnist.tfrecord.gz"


@pytest.fixture(scope="session")
def mnist_tfrecord() -> pathlib.Path:
    """The 1,000 real MNIST examples the repository ships, gzipped (read-only)."""
    assert MNIST_TFRECORD.exists(), f"missing built-in data: {MNIST_TFRECORD}"
    return MNIST_TFRECORD


def small_digits_config(output_dir: pathlib.Path, **overrides) -> PipelineConfig:
    """The default digits pipeline, trained briefly enough for tests yet above 0.95 accuracy."""
    return load_config(
        None, {"output_dir": str(output_dir), "trainer.train_steps": 300, **overrides}
    )


@pytest.fixture(scope="session")
def digits_run(tmp_path_factory):
    """One real local run of the whole digits pipeline, shared by the tests that read it.

    Returns (config, summary). Tests must not change its outputs; a test that
    needs a second run makes its own copy or its own run. Under pytest-xdist
    (`make test PYTEST_ARGS="-n auto"`) the first worker that needs it runs it and the others wait
    for it and read the same folder: one run per session, not one per worker.
    """
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the session's folder, above every worker's own
    done = root / "digits-run.pickle"
    with held_lock(root / "digits-run.lock", "the shared digits run", wait_seconds=None):
        if not done.exists():
            from pipeline.local_runner import run_local

            config = small_digits_config(root / "digits-run")
            done.write_bytes(pickle.dumps((config, run_local(config, io.StringIO()))))
    config, summary = pickle.loads(done.read_bytes())
    assert summary.succeeded, summary.error  # a failed run fails every worker, run once
    return config, summary
