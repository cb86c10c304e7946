"""The `tuner:` section: off by default, and a search space of TrainerConfig fields only."""

from __future__ import annotations

import pytest

from tpu_pipeline.common.config import ConfigError, load_config


def test_tuning_is_off_by_default_with_a_search_space_ready_to_switch_on():
    tuner = load_config().tuner
    assert tuner.enabled is False
    assert tuner.algorithm == "random" and tuner.objective == "val_accuracy"
    assert {"learning_rate", "per_replica_batch_size", "dropout"} <= set(tuner.search_space)


def test_any_trainer_recipe_field_can_be_searched():
    tuner = load_config(
        None,
        {
            "tuner.search_space": {
                "epochs": {"min": 2, "max": 6},
                "model": {"values": ["mnist_cnn", "cifar10_cnn"]},
                "learning_rate": {"min": 1e-4, "max": 1e-2, "sampling": "log"},
            }
        },
    ).tuner
    assert tuner.search_space["epochs"].extremes == (2, 6)
    assert tuner.search_space["model"].extremes == ("mnist_cnn", "cifar10_cnn")


@pytest.mark.parametrize(
    "space, message",
    [
        ({"lerning_rate": {"values": [0.1]}}, "'lerning_rate' is not a tunable trainer field"),
        ({"accelerator": {"values": ["cpu"]}}, "'accelerator' is not a tunable trainer field"),
        ({"train_steps": {"min": 10, "max": 20}}, "'train_steps' is not a tunable trainer field"),
        ({"learning_rate": {"min": -1, "max": 1}}, "learning_rate: -1 is not a valid trainer"),
        ({"dropout": {"values": [0.2, 1.5]}}, "dropout: 1.5 is not a valid trainer.dropout"),
        ({"learning_rate": {"min": 0.1, "max": 0.01}}, "min must be below max"),
        ({"learning_rate": {"values": [0.1], "min": 0.1}}, "either values: .* or min and max"),
        ({"dropout": {"min": 0, "max": 0.5, "sampling": "log"}}, "sampling: log needs min > 0"),
    ],
)
def test_a_bad_search_space_fails_naming_the_field(space, message):
    with pytest.raises(ConfigError, match=f"tuner.search_space.*{message}"):
        load_config(None, {"tuner.search_space": space})


def test_an_unknown_algorithm_or_objective_names_the_choices():
    with pytest.raises(ConfigError, match="tuner.algorithm: .*'random', 'hyperband' or 'bayesian'"):
        load_config(None, {"tuner.algorithm": "grid"})
    with pytest.raises(ConfigError, match="tuner.objective: .*'val_accuracy' or 'val_loss'"):
        load_config(None, {"tuner.objective": "accuracy"})
