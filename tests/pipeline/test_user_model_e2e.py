"""A user's own model, end to end on the digits: trained, evaluated, pushed and served.

The model lives in a package outside this repository, found on PYTHONPATH, as a
team's code would be. Editing it retrains: the cache sees the user's code.
"""

from __future__ import annotations

import io
import json
import pathlib
import sys

import pytest

from tests.pipeline.e2e_helpers import serving_accuracy
from tpu_pipeline.common.config import load_config
from tpu_pipeline.pipeline.local.runner import run_local

pytestmark = pytest.mark.slow

USER_MODEL = """
import tf_keras


def build(image_shape, num_classes):
    inputs = tf_keras.Input(image_shape)
    x = tf_keras.layers.Conv2D({filters}, 3, padding="same", activation="relu")(inputs)
    x = tf_keras.layers.Flatten()(x)
    return tf_keras.Model(inputs, tf_keras.layers.Dense(num_classes)(x))
"""


def _write_model(package, filters: int) -> None:
    (package / "cnn.py").write_text(USER_MODEL.format(filters=filters))


@pytest.fixture
def forgets_the_package():
    """The user's package leaves `sys.modules` with this test: its folder goes with the
    test, and a later test that writes its own `team_models` elsewhere must find that one
    (`importlib.util.find_spec` answers from `sys.modules` first)."""
    yield
    for name in [name for name in sys.modules if name.split(".")[0] == "team_models"]:
        del sys.modules[name]


def test_user_model_trains_pushes_and_serves_and_its_edits_retrain(
    forgets_the_package, tmp_path, monkeypatch
):
    package = tmp_path / "team_models"
    package.mkdir()
    (package / "__init__.py").write_text("")
    _write_model(package, filters=8)
    monkeypatch.syspath_prepend(str(tmp_path))
    config = load_config(
        None,
        {
            "output_dir": str(tmp_path / "out"),
            "trainer.model": "team_models.cnn:build",
            "trainer.epochs": 5,
        },
    )

    first = run_local(config, io.StringIO())
    assert first.succeeded, first.error
    assert first.blessed and first.pushed_model
    assert first.metrics["accuracy"] > 0.9
    assert serving_accuracy(first.pushed_model, config) == pytest.approx(
        first.metrics["accuracy"], abs=1e-6
    )
    info = json.loads(
        (pathlib.Path(first.pushed_model) / "assets.extra" / "training_info.json").read_text()
    )
    assert info["model"] == "team_models.cnn:build"

    _write_model(package, filters=12)
    del sys.modules["team_models.cnn"]  # as in a new `tpu-pipeline run` process
    second = run_local(config, io.StringIO())
    assert second.succeeded, second.error
    statuses = {c.id: c.status for c in second.components}
    assert statuses["Trainer"] == "executed"  # the edit was seen: no cached model
    assert statuses["StatisticsGen"] == "cached"
