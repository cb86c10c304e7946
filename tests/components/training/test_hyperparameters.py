"""Applying a search's values to the Trainer's configuration."""

from __future__ import annotations

import pydantic
import pytest

from tpu_pipeline.common.config import TrainerConfig
from tpu_pipeline.components.training.hyperparameters import (
    apply_hyperparameters,
    describe_values,
    tuned_values,
)


def test_tuned_values_replace_their_fields_and_keep_the_rest():
    config = apply_hyperparameters(
        TrainerConfig(train_steps=300), {"learning_rate": 0.01, "per_replica_batch_size": 32}
    )
    assert (config.learning_rate, config.per_replica_batch_size) == (0.01, 32)
    assert config.train_steps == 300 and config.model == TrainerConfig().model


def test_keras_tuner_bookkeeping_is_not_a_trainer_setting():
    values = {"dropout": 0.3, "tuner/epochs": 2, "tuner/bracket": 1, "tuner/trial_id": "0003"}
    assert tuned_values(values) == {"dropout": 0.3}


def test_a_value_the_field_does_not_allow_fails_naming_the_field():
    with pytest.raises(pydantic.ValidationError, match="per_replica_batch_size"):
        apply_hyperparameters(TrainerConfig(), {"per_replica_batch_size": 0})


def test_values_read_as_one_line():
    assert describe_values({"model": "mnist_cnn", "learning_rate": 0.0012345}) == (
        "learning_rate=0.001234, model=mnist_cnn"
    )
