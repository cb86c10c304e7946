"""The training recipe: batch-scaled peak rate, warmup, decay, and the optimizer choice."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from tpu_pipeline.common.config import ConfigError, TrainerConfig, load_config
from tpu_pipeline.components.training.learning_rate import (
    WarmupThenDecay,
    make_optimizer,
    peak_learning_rate,
)


def _rates(schedule: WarmupThenDecay, steps: int) -> np.ndarray:
    return np.array([float(schedule(step)) for step in range(steps)])


@pytest.mark.parametrize(
    ("scaling", "expected"), [("linear", 8e-3), ("sqrt", 4e-3), ("none", 2e-3)]
)
def test_peak_rate_follows_the_global_batch(scaling, expected):
    config = TrainerConfig(learning_rate=2e-3, learning_rate_scaling=scaling)
    assert peak_learning_rate(config, 4 * config.learning_rate_batch_size) == pytest.approx(
        expected
    )
    assert peak_learning_rate(config, config.learning_rate_batch_size) == pytest.approx(2e-3)


def test_warmup_rises_linearly_then_cosine_decays_to_zero():
    rates = _rates(WarmupThenDecay(1.0, warmup_steps=10, total_steps=110, decay="cosine"), 110)
    np.testing.assert_allclose(rates[:10], np.arange(1, 11) / 10, rtol=1e-6)
    assert rates[10] == pytest.approx(1.0)
    assert np.all(np.diff(rates[10:]) <= 1e-7)  # never rises again
    assert rates[60] == pytest.approx(0.5, abs=0.02)
    assert rates[-1] < 1e-3


def test_step_decay_drops_tenfold_at_half_and_three_quarters():
    rates = _rates(WarmupThenDecay(1.0, warmup_steps=0, total_steps=100, decay="step"), 100)
    assert set(np.round(rates[:50], 6)) == {1.0}
    assert set(np.round(rates[50:75], 6)) == {0.1}
    assert set(np.round(rates[75:], 6)) == {0.01}


def test_constant_decay_holds_the_peak_after_warmup():
    rates = _rates(WarmupThenDecay(0.5, warmup_steps=4, total_steps=20, decay="constant"), 20)
    assert rates[3] == pytest.approx(0.5) and set(np.round(rates[4:], 6)) == {0.5}


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("adam", tf_keras.optimizers.Adam),
        ("adamw", tf_keras.optimizers.AdamW),
        ("sgd", tf_keras.optimizers.SGD),
    ],
)
def test_optimizer_choice_is_built_on_the_scheduled_rate(name, kind):
    config = TrainerConfig(optimizer=name, warmup_epochs=2)
    optimizer = make_optimizer(config, 64, steps_per_epoch=5, total_steps=50)
    assert type(optimizer) is kind
    schedule = optimizer._learning_rate
    assert isinstance(schedule, WarmupThenDecay)
    assert (schedule.warmup_steps, schedule.total_steps) == (10, 50)
    if name == "sgd":
        assert optimizer.momentum == pytest.approx(0.9) and optimizer.nesterov


def test_unknown_optimizer_is_named_with_the_choices():
    with pytest.raises(ConfigError, match=r"trainer.optimizer: .*'adam', 'adamw' or 'sgd'"):
        load_config(None, {"trainer.optimizer": "rmsprop"})


def test_default_training_length_is_whole_epochs_over_the_data():
    config = TrainerConfig()
    assert config.train_steps is None and config.epochs >= 10
    assert config.learning_rate_decay == "cosine"


def test_linear_decay_after_warmup_is_a_one_cycle_schedule_ending_at_zero():
    rates = _rates(WarmupThenDecay(2.0, warmup_steps=23, total_steps=100, decay="linear"), 101)
    assert rates.max() == pytest.approx(2.0) and rates[23] == pytest.approx(2.0)
    np.testing.assert_allclose(np.diff(rates[23:]), -2.0 / 77, rtol=1e-4)  # a straight line
    assert rates[100] == pytest.approx(0.0, abs=1e-6)


def _train_steps(optimizer, steps: int, start: float = 1.0) -> tuple[tf.Variable, list[float]]:
    """A weight pulled towards 0 by a constant gradient of 1: its value after each step."""
    weight = tf.Variable(start)
    values = []
    for _ in range(steps):
        optimizer.apply_gradients([(tf.constant(1.0), weight)])
        values.append(float(weight.numpy()))
    return weight, values


def test_sgd_weight_decay_shrinks_weights_by_rate_times_decay_each_step():
    config = TrainerConfig(optimizer="sgd", momentum=0.0, warmup_epochs=0, weight_decay=0.1)
    decayed = make_optimizer(config, 64, 10, 10)
    plain = make_optimizer(config.model_copy(update={"weight_decay": None}), 64, 10, 10)
    rate = float(decayed.learning_rate)

    weight, _ = _train_steps(decayed, 1, start=10.0)
    assert float(weight.numpy()) == pytest.approx(10.0 * (1 - 0.1 * rate) - rate)
    assert _train_steps(plain, 1, start=10.0)[1][0] == pytest.approx(10.0 - rate)


def _averaging_sgd(weight_averaging: str) -> TrainerConfig:
    """Plain SGD at a constant 0.1, so each step moves a weight by exactly 0.1 x its gradient."""
    return TrainerConfig(
        optimizer="sgd",
        momentum=0.0,
        learning_rate=0.1,
        learning_rate_decay="constant",
        warmup_epochs=0,
        weight_averaging=weight_averaging,
    )


def test_lookahead_restarts_from_the_average_every_five_steps_and_ends_on_it():
    config = _averaging_sgd("lookahead")
    averaging = make_optimizer(config, 64, 10, 10)
    weight = tf.Variable(1.0)
    plain = [1.0 - 0.1 * step for step in range(1, 11)]  # the same steps without averaging
    values, averages = [], []
    for _ in range(10):
        averaging.apply_gradients([(tf.constant(1.0), weight)])
        values.append(float(weight.numpy()))
        averages.append(float(averaging._model_variables_moving_average[0].numpy()))

    assert values[:4] == pytest.approx(plain[:4], abs=1e-5)  # steps 1-4 train as usual
    assert values[4] == pytest.approx(averages[4]) and values[4] > plain[4] + 0.01  # restarted
    assert values[9] == pytest.approx(averages[9]) and values[5] != pytest.approx(averages[5])
    weight.assign(0.0)
    averaging.finalize_variable_values([weight])  # what fit does after the last epoch
    assert float(weight.numpy()) == pytest.approx(averages[9])


def test_ema_keeps_training_the_weights_and_exports_their_average():
    config = _averaging_sgd("ema")
    averaging = make_optimizer(config, 64, 20, 20)
    weight, values = _train_steps(averaging, 20)

    np.testing.assert_allclose(values, 1.0 - 0.1 * np.arange(1, 21), atol=1e-5)  # unaffected
    averaging.finalize_variable_values([weight])
    assert 1.0 - 0.1 * 20 < float(weight.numpy()) < 1.0 - 0.1 * 15  # the recent steps' mean
