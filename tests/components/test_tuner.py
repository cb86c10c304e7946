"""The Tuner's search space, algorithms and where trials write, without training."""

from __future__ import annotations

import json

import keras_tuner
import pytest

from common.config import load_config
from common.tfx_api import json_utils, standard_artifacts
from components.hyperparameters import TRIALS_SUBDIR
from components.tuner import TRIALS_DIR_KEY, build_oracle, search_space, with_trials_dir


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
