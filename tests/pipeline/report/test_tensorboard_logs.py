"""The Trainer's TensorBoard logs hold every kind of summary, and the CLI finds them."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.util import tensor_util

from tpu_pipeline.cli.main import main
from tpu_pipeline.components.models import build_model, compile_model
from tpu_pipeline.components.training.training_logs import training_callbacks, write_run_summaries
from tpu_pipeline.pipeline.report.run_store import open_latest_run
from tpu_pipeline.pipeline.report.tensorboard_logs import epoch_scalars, summary_kinds


def _trainer_log_dir(config):
    return open_latest_run(config.run_dir).first_output("Trainer", "model_run").uri


@pytest.mark.slow
def test_trainer_logs_scalars_histograms_images_and_text(digits_run):
    config, _ = digits_run
    kinds = summary_kinds(_trainer_log_dir(config))
    assert {
        "epoch_loss",
        "epoch_accuracy",
        "epoch_learning_rate",
        "epoch_seconds",
        "epoch_examples_per_second",
    } <= set(kinds["scalars"])
    assert any(tag.endswith("conv1/kernel_0/histogram") for tag in kinds["histograms"])
    assert kinds["images"] == ["input_samples"]
    assert {"run_config", "model_summary"} <= set(kinds["text"])
    assert "profile" not in kinds  # only with trainer.profile_batches


@pytest.mark.slow
def test_trainer_logs_one_value_per_epoch_for_train_and_validation(digits_run):
    config, _ = digits_run
    scalars = epoch_scalars(_trainer_log_dir(config))
    assert len(scalars["train"]["loss"]) == config.trainer.epochs
    assert len(scalars["validation"]["loss"]) == config.trainer.epochs


def test_profile_batches_write_a_profiler_trace(tmp_path):
    images = np.random.default_rng(0).random((64, 8, 8, 1), dtype=np.float32)
    dataset = tf.data.Dataset.from_tensor_slices((images, np.arange(64) % 10)).batch(8)
    model = build_model("mnist_cnn", (8, 8, 1), 10)
    compile_model(model, tf_keras.optimizers.Adam(1e-3), jit_compile=False, precision="float32")
    log_dir = tmp_path / "logs"
    write_run_summaries(str(log_dir), images[:4], {"device": "cpu"})
    callbacks = training_callbacks(str(log_dir), str(tmp_path / "backup"), 2, 64, (2, 3), 64)
    model.fit(dataset, epochs=2, callbacks=callbacks, verbose=0)
    kinds = summary_kinds(log_dir)
    assert kinds["profile"]
    assert {"input_samples"} == set(kinds["images"])
    assert "model_summary" in kinds["text"]


@pytest.mark.slow
def test_tensorboard_command_points_at_the_newest_trainer_run(digits_run, capsys):
    config, _ = digits_run
    assert main(["tensorboard", str(config.run_dir)]) == 0
    assert capsys.readouterr().out.strip() == f"tensorboard --logdir {_trainer_log_dir(config)}"
    assert main(["tensorboard", str(config.run_dir), "--all-runs", "--port", "7007"]) == 0
    parent = str(config.pipeline_root / "Trainer" / "model_run")
    assert capsys.readouterr().out.strip() == f"tensorboard --logdir {parent} --port 7007"


def _run_summaries(log_dir):
    """The `run/` summaries by tag: (description, first value as a numpy array)."""
    accumulator = event_accumulator.EventAccumulator(
        str(log_dir / "run"), size_guidance={"tensors": 0}
    )
    accumulator.Reload()
    return {
        tag: (
            accumulator.SummaryMetadata(tag).summary_description,
            tensor_util.make_ndarray(accumulator.Tensors(tag)[0].tensor_proto),
        )
        for tag in accumulator.Tags()["tensors"]
    }


def test_run_summaries_name_the_classes_of_the_samples_and_list_every_class(tmp_path):
    images = np.zeros((4, 8, 8, 1), np.float32)
    labels = tf.constant([[2], [0], [1], [2]], tf.int64)  # as the eval input batches them

    write_run_summaries(str(tmp_path), images, {}, labels, ("cat", "dog", "bird"))

    summaries = _run_summaries(tmp_path)
    description, _ = summaries["input_samples"]
    assert "Classes, left to right: bird, cat, dog, bird" in description
    _, classes = summaries["classes"]
    assert classes.item().decode().splitlines()[2:] == [
        "| 0 | cat |",
        "| 1 | dog |",
        "| 2 | bird |",
    ]
