"""What every training of a Trainer or Tuner run shares: the data, the device, the Transform graph.

It is resolved once per process, before anything trains: the TPU is connected to (or
the workers joined, `components/device/strategy.py`) once, and the Transform graph read
once, whether the process then trains once (the Trainer's `run_fn`) or once per trial
(the Tuner). Each training then takes it to `training.task.fit`, with the folder its
backups go to.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from typing import Any

import tensorflow_transform as tft

from tpu_pipeline.common.config import DatasetConfig, TrainerConfig
from tpu_pipeline.common.tfx_api import FnArgs
from tpu_pipeline.components.device.strategy import StrategyChoice, resolve_strategy


@dataclasses.dataclass(frozen=True)
class TrainingSetup:
    """The data, the device and the Transform graph of every training in this process."""

    dataset: DatasetConfig
    choice: StrategyChoice
    transform_output: tft.TFTransformOutput
    train_files: list[str]
    eval_files: list[str]
    eval_steps: int | None


def training_setup(fn_args: FnArgs, dataset: DatasetConfig, config: TrainerConfig) -> TrainingSetup:
    """Resolves the device and reads the Transform graph (once) from TFX's arguments."""
    return TrainingSetup(
        dataset=dataset,
        choice=resolve_strategy(config),
        transform_output=tft.TFTransformOutput(fn_args.transform_graph_path),
        train_files=fn_args.train_files,
        eval_files=fn_args.eval_files,
        eval_steps=fn_args.eval_steps,
    )


def backup_dir_for(model_run_dir: str, training_inputs: dict[str, Any]) -> str:
    """A backup folder that stays the same when the same training is retried.

    TFX gives every Trainer attempt a new `model_run_dir`, so a backup kept
    there could never be found again. Keying it by the training inputs lets a
    retry with the same inputs resume, and keeps different trainings apart.
    """
    fingerprint = hashlib.sha256(json.dumps(training_inputs, sort_keys=True).encode()).hexdigest()
    return os.path.join(os.path.dirname(model_run_dir.rstrip("/")), "backup", fingerprint[:16])
