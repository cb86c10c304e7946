"""Training in a child process: when `auto` takes one, and that the child trains and exports
the model the pipeline's process would have, and reports its failures by name."""

from __future__ import annotations

import dataclasses
import json
import logging
import pathlib
import tempfile

import psutil
import pytest

from tpu_pipeline.common.config import DatasetConfig, TrainerConfig
from tpu_pipeline.common.tfx_api import FnArgs
from tpu_pipeline.components.training import separate_process
from tpu_pipeline.components.training.separate_process import (
    LOG_LINE_PREFIX,
    TrainingProcessError,
    TrainingRequest,
    failure,
    relay_line,
    train_in_child,
    trains_in_child,
)


def _dataset(name: str, image_shape: tuple[int, int, int]) -> DatasetConfig:
    return DatasetConfig(
        name=name,
        image_shape=image_shape,
        num_classes=10,
        pixel_feature="image",
        label_feature="label",
    )


PHOTOS, DIGITS = _dataset("photos", (224, 224, 3)), _dataset("digits", (8, 8, 1))
PHOTO_BATCH = TrainerConfig(per_replica_batch_size=16)  # 2.4 million values a batch


@pytest.fixture
def cpu_only(monkeypatch):
    """A machine of one worker with no TPU and no GPU; returns a setter for each signal."""
    signals = {"tpu": [], "gpu": [], "cluster": None}
    monkeypatch.setattr(separate_process, "find_tpu_signals", lambda: signals["tpu"])
    monkeypatch.setattr(separate_process, "multi_worker_cluster", lambda: signals["cluster"])
    monkeypatch.setattr(
        separate_process.tf.config, "list_physical_devices", lambda kind: signals["gpu"]
    )
    return signals


def test_auto_trains_large_batches_of_pixels_in_a_child_on_a_cpu_only_machine(cpu_only):
    assert trains_in_child(PHOTO_BATCH, PHOTOS)
    # 64 digits of 8x8: megabytes left behind, not worth a new interpreter's start-up.
    assert not trains_in_child(TrainerConfig(per_replica_batch_size=64), DIGITS)
    # The threshold counts what one replica's batch holds.
    assert not trains_in_child(TrainerConfig(per_replica_batch_size=6), PHOTOS)
    assert trains_in_child(TrainerConfig(per_replica_batch_size=7), PHOTOS)


@pytest.mark.parametrize(
    "signal, value",
    [
        ("tpu", ["$TPU_NAME"]),
        ("gpu", ["/physical_device:GPU:0"]),
        ("cluster", {"worker": ["a:1", "b:2"]}),
    ],
)
def test_auto_trains_in_this_process_next_to_an_accelerator_or_a_cluster(cpu_only, signal, value):
    cpu_only[signal] = value
    assert not trains_in_child(PHOTO_BATCH, PHOTOS)


@pytest.mark.parametrize("accelerator", ["tpu", "gpu"])
def test_auto_trains_in_this_process_when_an_accelerator_is_asked_for(cpu_only, accelerator):
    assert not trains_in_child(PHOTO_BATCH.model_copy(update={"accelerator": accelerator}), PHOTOS)


def test_an_explicit_choice_wins_over_auto(cpu_only):
    same = PHOTO_BATCH.model_copy(update={"training_process": "same"})
    child = TrainerConfig(per_replica_batch_size=64, training_process="child")
    assert not trains_in_child(same, PHOTOS)
    assert trains_in_child(child, DIGITS)


def test_a_child_cannot_be_asked_for_in_a_multi_worker_cluster(cpu_only):
    cpu_only["cluster"] = {"worker": ["a:1", "b:2"]}
    with pytest.raises(ValueError, match="TF_CONFIG names several workers"):
        trains_in_child(TrainerConfig(training_process="child"), DIGITS)


def test_the_child_gets_back_every_argument_run_fn_reads(tmp_path):
    # What the child's run_fn trains and exports by: TFX's arguments, the Tuner's values too.
    fn_args = FnArgs(
        custom_config={"trainer": {"epochs": 2}},
        train_files=["train/*"],
        eval_files=["eval/*"],
        transform_graph_path="transform",
        eval_steps=None,
        train_steps=12,
        serving_model_dir="serving",
        model_run_dir="model_run/1",
        base_model="blessed/Format-Serving",
        hyperparameters={"values": {"learning_rate": 0.01}},
    )
    TrainingRequest.from_fn_args(fn_args).write(tmp_path)
    back = TrainingRequest.read(tmp_path).fn_args()
    for field in dataclasses.fields(TrainingRequest):
        assert getattr(back, field.name) == getattr(fn_args, field.name), field.name


def test_a_childs_log_record_is_logged_again_and_other_lines_pass_through(caplog, capsys):
    caplog.set_level(logging.INFO)
    # The absl logger's own level too: a command run earlier in this process (`serving
    # list` quiets absl) must not decide what this test sees.
    caplog.set_level(logging.INFO, logger="absl")
    record = json.dumps([logging.WARNING, "epoch 1/2: a\nb"])
    relay_line(f"{LOG_LINE_PREFIX}{record}\n")
    relay_line("a library's own line\n")
    relay_line(f'{LOG_LINE_PREFIX}[20, "broken into\n')
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.WARNING, "epoch 1/2: a\nb")
    ]
    assert capsys.readouterr().err == f"a library's own line\n{LOG_LINE_PREFIX}[20, \"broken into\n"


def test_a_child_killed_without_a_word_is_reported_by_signal(tmp_path):
    assert failure(tmp_path, -9).startswith(
        "the training process was killed by SIGKILL (the kernel's OOM"
    )
    assert failure(tmp_path, -15) == "the training process was killed by SIGTERM"
    assert "exit code 3" in failure(tmp_path, 3)


def _request(config, run: pathlib.Path) -> TrainingRequest:
    from tests.pipeline.e2e_helpers import run_fn_args

    return TrainingRequest.from_fn_args(FnArgs(**run_fn_args(config, run)))


@pytest.mark.slow
def test_the_childs_error_is_raised_here_by_name_and_its_folder_removed(
    digits_run, tmp_path, monkeypatch
):
    config, _ = digits_run
    wrong = config.model_copy(
        update={"explain": config.explain.model_copy(update={"grad_cam_layer": "no_such"})}
    )
    temp_dir = tmp_path / "tmp"  # where the work folder is made
    temp_dir.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp_dir))
    with pytest.raises(TrainingProcessError, match="^ValueError: explain.grad_cam_layer 'no_such'"):
        train_in_child(_request(wrong, tmp_path))
    assert list(temp_dir.iterdir()) == []
    assert not psutil.Process().children()


@pytest.mark.slow
def test_a_child_trains_what_the_pipelines_process_trained(digits_run, tmp_path, caplog):
    """digits_run's Trainer trained in-process (auto, 8x8 digits); the same configuration in a
    child gives a model as accurate, the same TensorBoard curves, and the epoch lines."""
    from tests.pipeline.e2e_helpers import run_fn_args, serving_accuracy
    from tpu_pipeline.components.trainer import run_fn
    from tpu_pipeline.pipeline.report.run_store import open_latest_run
    from tpu_pipeline.pipeline.report.tensorboard_logs import epoch_scalars

    config, summary = digits_run
    assert summary.trainer["training_process"] == "same"
    child = config.model_copy(
        update={"trainer": config.trainer.model_copy(update={"training_process": "child"})}
    )
    run = tmp_path / "child"
    caplog.set_level(logging.INFO, logger="absl")  # where the Trainer logs its epochs
    run_fn(FnArgs(**run_fn_args(child, run)))

    info = json.loads((run / "serving" / "assets.extra" / "training_info.json").read_text())
    assert info["training_process"] == "child"
    assert info["device"] == "cpu" and info["model"] == config.trainer.model
    in_process = pathlib.Path(summary.pushed_model)
    assert serving_accuracy(run / "serving", config) == pytest.approx(
        serving_accuracy(in_process, config), abs=0.02
    )
    trained_here = open_latest_run(config.run_dir).first_output("Trainer", "model_run").uri
    assert epoch_scalars(run / "model_run" / "1").keys() == epoch_scalars(trained_here).keys()
    epochs = [r.getMessage() for r in caplog.records if r.getMessage().startswith("epoch ")]
    assert len(epochs) == config.trainer.epochs
    assert not psutil.Process().children()  # the child exited
