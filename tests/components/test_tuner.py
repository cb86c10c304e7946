"""The Tuner's search space, algorithms and where trials write, without training."""

from __future__ import annotations

import json
import types

import keras_tuner
import pytest

import tpu_pipeline.components.tuner
from tpu_pipeline.common.config import load_config
from tpu_pipeline.common.tfx_api import FnArgs, json_utils, standard_artifacts
from tpu_pipeline.components.training.hyperparameters import TRIALS_SUBDIR
from tpu_pipeline.components.tuner import (
    TRIALS_DIR_KEY,
    build_oracle,
    search_space,
    tuner_fn,
    with_trials_dir,
)


def _tuner_config(**overrides):
    return load_config(None, {f"tuner.{k}": v for k, v in overrides.items()}).tuner


def test_search_space_maps_lists_integer_and_float_ranges():
    space = search_space(
        _tuner_config(
            search_space={
                "per_replica_batch_size": {"values": [32, 64]},
                "epochs": {"min": 2, "max": 6, "step": 2},
                "learning_rate": {"min": 1e-4, "max": 1e-2, "sampling": "log"},
            }
        )
    )
    kinds = {p.name: p for p in space.space}
    assert isinstance(kinds["per_replica_batch_size"], keras_tuner.engine.hyperparameters.Choice)
    assert list(kinds["per_replica_batch_size"].values) == [32, 64]
    assert isinstance(kinds["epochs"], keras_tuner.engine.hyperparameters.Int)
    assert (kinds["epochs"].min_value, kinds["epochs"].max_value, kinds["epochs"].step) == (2, 6, 2)
    assert isinstance(kinds["learning_rate"], keras_tuner.engine.hyperparameters.Float)
    assert kinds["learning_rate"].sampling == "log"


@pytest.mark.parametrize(
    "algorithm, oracle_class",
    [
        ("random", keras_tuner.oracles.RandomSearchOracle),
        ("hyperband", keras_tuner.oracles.HyperbandOracle),
        ("bayesian", keras_tuner.oracles.BayesianOptimizationOracle),
    ],
)
def test_each_algorithm_is_its_keras_tuner_oracle(algorithm, oracle_class):
    oracle = build_oracle(_tuner_config(algorithm=algorithm, max_trials=3), epochs=6, seed=1)
    assert isinstance(oracle, oracle_class)
    assert (oracle.objective.name, oracle.objective.direction) == ("val_accuracy", "max")
    if algorithm == "hyperband":
        assert oracle.max_epochs == 6  # the Trainer's epochs are Hyperband's largest budget
    else:
        assert oracle.max_trials == 3


def test_loss_is_minimised():
    oracle = build_oracle(_tuner_config(objective="val_loss"), epochs=6, seed=1)
    assert (oracle.objective.name, oracle.objective.direction) == ("val_loss", "min")


def test_trials_write_into_the_tuner_results_output_and_custom_config_is_kept(tmp_path):
    results = standard_artifacts.TunerResults()
    results.uri = str(tmp_path / "tuner_results" / "7")
    properties = {"custom_config": json_utils.dumps({"trainer": {"seed": 1}}), "other": "x"}

    updated = with_trials_dir(properties, {"tuner_results": [results]})

    custom_config = json.loads(updated["custom_config"])
    assert custom_config["trainer"] == {"seed": 1} and updated["other"] == "x"
    assert custom_config[TRIALS_DIR_KEY] == f"{results.uri}/{TRIALS_SUBDIR}"
    assert TRIALS_DIR_KEY not in json.loads(properties["custom_config"])  # input left alone


class _History:
    def __init__(self, accuracy: float):
        self.history = {"val_accuracy": [accuracy / 2, accuracy], "val_loss": [1.0, 0.5]}


def _tuner_with_fake_training(tmp_path, monkeypatch, fake_fit, **tuner_overrides):
    """A PipelineTuner whose trials call `fake_fit` instead of training (no device, no data)."""
    config = load_config(
        None,
        {"trainer.epochs": 4, "trainer.train_steps": 40}
        | {f"tuner.{k}": v for k, v in tuner_overrides.items()},
    )
    # A CPU's setup: no TPU preflight before a trial.
    cpu = types.SimpleNamespace(choice=types.SimpleNamespace(device="cpu"))
    monkeypatch.setattr(tpu_pipeline.components.tuner, "training_setup", lambda *args: cpu)
    monkeypatch.setattr(tpu_pipeline.components.tuner, "fit", fake_fit)
    fn_args = FnArgs(
        working_dir=str(tmp_path / "work"),
        train_steps=20,  # the Tuner's TrainArgs: the per-trial budget
        custom_config={
            "dataset": config.dataset.model_dump(mode="json"),
            "trainer": config.trainer.model_dump(mode="json"),
            "tuner": config.tuner.model_dump(mode="json"),
            TRIALS_DIR_KEY: str(tmp_path / "trials"),
        },
    )
    return tuner_fn(fn_args)


def test_trials_train_the_trial_values_for_the_budget_and_are_recorded(tmp_path, monkeypatch):
    calls = []

    def fake_fit(setup, config, *, train_steps, log_dir, backup_dir):
        calls.append((config, train_steps, log_dir))
        return None, _History(accuracy=config.learning_rate * 10), {}

    space = {"learning_rate": {"values": [0.01, 0.05, 0.09]}}
    result = _tuner_with_fake_training(
        tmp_path, monkeypatch, fake_fit, max_trials=3, search_space=space
    )
    result.tuner.search(**result.fit_kwargs)

    assert sorted(c[0].learning_rate for c in calls) == [0.01, 0.05, 0.09]
    assert {(c[0].epochs, c[1]) for c in calls} == {(4, 20)}  # 4 epochs of 5 steps
    records = [
        json.loads(p.read_text()) for p in sorted((tmp_path / "trials").glob("*/trial.json"))
    ]
    assert [r["status"] for r in records] == ["COMPLETED"] * 3
    assert {r["hyperparameters"]["learning_rate"]: r["value"] for r in records} == pytest.approx(
        {0.01: 0.1, 0.05: 0.5, 0.09: 0.9}
    )
    assert all(r["seconds"] >= 0 and r["objective"] == "val_accuracy" for r in records)
    assert {c[2] for c in calls} == {
        str(p.parent) for p in (tmp_path / "trials").glob("*/trial.json")
    }
    assert result.tuner.get_best_hyperparameters()[0].values["learning_rate"] == 0.09


def test_hyperband_trials_train_the_epochs_it_gives_them(tmp_path, monkeypatch):
    budgets = []

    def fake_fit(setup, config, *, train_steps, log_dir, backup_dir):
        budgets.append((config.epochs, train_steps))
        return None, _History(accuracy=0.5), {}

    result = _tuner_with_fake_training(tmp_path, monkeypatch, fake_fit, algorithm="hyperband")
    result.tuner.search(**result.fit_kwargs)

    assert {epochs for epochs, _ in budgets} > {4}  # shorter rungs, then the full 4 epochs
    assert all(steps == epochs * 5 for epochs, steps in budgets)  # 20 steps / 4 epochs each


def test_a_search_where_no_trial_finishes_fails_with_the_reason(tmp_path, monkeypatch):
    def fake_fit(*args, **kwargs):
        raise ValueError("trainer.model 'x' cannot compile")

    result = _tuner_with_fake_training(tmp_path, monkeypatch, fake_fit, max_trials=1)
    with pytest.raises(RuntimeError, match="no tuner trial finished(.|\n)*cannot compile"):
        result.tuner.search(**result.fit_kwargs)
    (record,) = [json.loads(p.read_text()) for p in (tmp_path / "trials").glob("*/trial.json")]
    assert record["status"] != "COMPLETED" and "cannot compile" in record["error"]
