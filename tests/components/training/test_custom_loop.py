"""The custom loop trains as `fit` does: same updates, same metrics and logs, same accuracy."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from tests.pipeline.e2e_helpers import run_fn_args, serving_accuracy
from tpu_pipeline.common.config import TrainerConfig
from tpu_pipeline.common.tfx_api import FnArgs
from tpu_pipeline.components.device.policy import TrainingPolicy
from tpu_pipeline.components.models import build_model, compile_model
from tpu_pipeline.components.trainer import run_fn
from tpu_pipeline.components.training.custom_loop import train_custom_loop
from tpu_pipeline.components.training.input_pipeline import EvalInput
from tpu_pipeline.components.training.learning_rate import make_optimizer
from tpu_pipeline.components.training.loop import train
from tpu_pipeline.pipeline.report.run_store import open_latest_run
from tpu_pipeline.pipeline.report.tensorboard_logs import epoch_scalars


def _dataset(steps: int, batch: int) -> tf.data.Dataset:
    rng = np.random.default_rng(0)
    images = rng.random((steps * batch, 8, 8, 1), dtype=np.float32)
    labels = rng.integers(0, 10, steps * batch)
    return tf.data.Dataset.from_tensor_slices((images, labels)).batch(batch, drop_remainder=True)


def _weighted(data: tf.data.Dataset) -> tf.data.Dataset:
    """Eval batches as the Trainer makes them: every example weighted (here all 1)."""
    return data.map(lambda images, labels: (images, labels, tf.ones_like(labels, tf.float32)))


# fast_cnn's recipe's loss and optimizer: smoothed targets, weights averaged by lookahead.
SMOOTHED_LOOKAHEAD = TrainerConfig(
    optimizer="sgd", label_smoothing=0.2, weight_averaging="lookahead", learning_rate=0.01
)


def _model(steps_per_execution: int = 1, recipe: TrainerConfig | None = None):
    # cifar10_cnn has no dropout: both loops must then compute exactly the same steps.
    tf.keras.utils.set_random_seed(1)
    model = build_model("cifar10_cnn", (8, 8, 1), 10)
    if recipe is None:
        compile_model(model, tf_keras.optimizers.Adam(1e-3), False, "float32", steps_per_execution)
    else:
        optimizer = make_optimizer(recipe, 16, steps_per_epoch=6, total_steps=12)
        compile_model(
            model, optimizer, False, "float32", steps_per_execution, recipe.label_smoothing
        )
    return model


@pytest.mark.parametrize(
    ("steps_per_execution", "recipe"), [(1, None), (3, None), (3, SMOOTHED_LOOKAHEAD)]
)
def test_custom_loop_makes_the_same_updates_and_metrics_as_fit(steps_per_execution, recipe):
    data = _dataset(steps=6, batch=16)
    by_fit, by_loop = _model(recipe=recipe), _model(recipe=recipe)
    for fit_start, loop_start in zip(by_fit.get_weights(), by_loop.get_weights(), strict=True):
        np.testing.assert_array_equal(fit_start, loop_start)

    fit_history = by_fit.fit(data, epochs=2, validation_data=_weighted(data), verbose=0)
    loop_history = train_custom_loop(
        by_loop,
        tf.distribute.get_strategy(),
        data.repeat(),
        _weighted(data),
        epochs=2,
        steps_per_epoch=6,
        steps_per_execution=steps_per_execution,
        global_batch_size=16,
        jit_compile=False,
        callbacks=[],
    )

    for fitted, looped in zip(by_fit.get_weights(), by_loop.get_weights(), strict=True):
        np.testing.assert_allclose(fitted, looped, rtol=1e-4, atol=1e-5)
    assert set(loop_history.history) == set(fit_history.history)
    for name, values in fit_history.history.items():
        np.testing.assert_allclose(loop_history.history[name], values, rtol=1e-4, err_msg=name)


@pytest.mark.parametrize("loop", ["fit", "custom"])
def test_steps_per_execution_runs_every_step_of_every_epoch(tmp_path, loop):
    model = _model(steps_per_execution=4)  # 6 steps per epoch: calls of 4 and 2
    data = _dataset(steps=6, batch=16)
    history = train(
        model,
        data.repeat(),
        EvalInput(_weighted(data), 96),
        strategy=tf.distribute.get_strategy(),
        policy=TrainingPolicy(jit_compile=False, precision="float32", steps_per_execution=4),
        config=TrainerConfig(epochs=3, loop=loop),
        steps_per_epoch=6,
        batch_size=16,
        log_dir=str(tmp_path / "logs"),
        backup_dir=str(tmp_path / "backup"),
    )
    assert history.epoch == [0, 1, 2]
    assert int(model.optimizer.iterations) == 18  # no step lost to the uneven last call
    # The epoch lines' throughput counts every example of the epoch.
    assert all(rate > 0 for rate in history.history["examples_per_second"])


@pytest.mark.slow
def test_fit_and_custom_loop_reach_the_same_accuracy_through_run_fn(digits_run, tmp_path):
    """The custom loop trained again on digits_run's data, against digits_run's own Trainer
    (the same configuration with `fit`): one training here, not two."""
    config, summary = digits_run
    fitted = pathlib.Path(summary.pushed_model)
    assert summary.trainer["loop"] == "fit"
    custom = config.model_copy(
        update={"trainer": config.trainer.model_copy(update={"loop": "custom"})}
    )
    run = tmp_path / "custom"
    run_fn(FnArgs(**run_fn_args(custom, run)))
    info = json.loads((run / "serving" / "assets.extra" / "training_info.json").read_text())
    assert info["loop"] == "custom"
    accuracy = {
        "fit": serving_accuracy(fitted, config),
        "custom": serving_accuracy(run / "serving", config),
    }
    curves = {
        loop: {
            split: {name: len(values) for name, values in scalars.items()}
            for split, scalars in epoch_scalars(log_dir).items()
        }
        for loop, log_dir in (
            ("fit", open_latest_run(config.run_dir).first_output("Trainer", "model_run").uri),
            ("custom", run / "model_run" / "1"),
        )
    }
    assert accuracy["custom"] >= 0.9
    assert accuracy["custom"] == pytest.approx(accuracy["fit"], abs=0.02)
    # The same per-epoch curves in TensorBoard (and the report), whichever loop drew them.
    assert curves["custom"] == curves["fit"]
    assert curves["custom"]["validation"]["accuracy"] == config.trainer.epochs
