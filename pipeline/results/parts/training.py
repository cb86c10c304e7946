"""The Trainer's and the Tuner's part: how the model was trained, and the trials that chose
its hyperparameters."""

from __future__ import annotations

import json
import pathlib
from typing import TYPE_CHECKING, Any

from tfx.utils.path_constants import SERVING_MODEL_DIR

from tpu_pipeline.components.serving.temperature import TEMPERATURE_INFO_KEY, TemperatureFit
from tpu_pipeline.pipeline.results.summary_part import (
    read_step,
    summary_key,
    summary_part,
    text_lines,
)
from tpu_pipeline.pipeline.results.tuning_results import TuningResult, read_tuning
from tpu_pipeline.pipeline.wiring.node_ids import NodeIds

if TYPE_CHECKING:
    from tpu_pipeline.pipeline.results.summary_reading import FinishedRun

TRAINING_INFO_FILE = pathlib.Path(SERVING_MODEL_DIR) / "assets.extra" / "training_info.json"


@summary_part
class Training:
    """What the Trainer recorded beside the model, and the Tuner's search."""

    trainer: dict[str, Any] | None = summary_key(
        "the Trainer's `training_info.json` (device, strategy, replicas, XLA, precision, "
        "batch, ...), with the ServingPackager's temperature fit when it made one",
        null="the run has no trained model",
        example={
            "device": "cpu",
            "strategy": "CPU (default strategy)",
            "num_replicas": 1,
            "global_batch_size": 64,
            "jit_compile": False,
            "precision": "mixed_bfloat16",
            "epochs": 15,
            "model": "cnn_bn",
        },
        default=None,
    )
    tuning: TuningResult | None = summary_key(
        "the Tuner's trials and the chosen one",
        null="the run has no Tuner (`tuner.enabled` false)",
        example={
            "objective": "val_accuracy",
            "chosen_trial_id": "01",
            "chosen_hyperparameters": {"learning_rate": 0.001},
            "trials": [
                {
                    "trial_id": "01",
                    "status": "COMPLETED",
                    "hyperparameters": {"learning_rate": 0.001},
                    "objective": "val_accuracy",
                    "value": 0.9633,
                    "seconds": 12.4,
                    "log_dir": "output/tpu-pipeline-digits/pipeline_root/Tuner/tuner_results/7/"
                    "trials/01",
                }
            ],
        },
        default=None,
    )

    @read_step(20)
    def read_training(self, run: FinishedRun) -> None:
        tuner = run.record.node(NodeIds.TUNER).outputs
        if tuner.get("tuner_results") and tuner.get("best_hyperparameters"):
            self.tuning = read_tuning(tuner["tuner_results"][0], tuner["best_hyperparameters"][0])
        if run.trained and run.model is not None:
            # The Trainer's training_info.json, with the ServingPackager's temperature fit.
            info_path = pathlib.Path(run.model.uri) / TRAINING_INFO_FILE
            if info_path.exists():
                self.trainer = json.loads(info_path.read_text())

    def temperature_fit(self) -> TemperatureFit | None:
        """The ServingPackager's temperature fit (`serving.temperature_scaling`), recorded in
        the served model's training_info, if it made one."""
        recorded = (self.trainer or {}).get(TEMPERATURE_INFO_KEY)
        return TemperatureFit.from_json(recorded) if recorded else None

    @text_lines(10)
    def training_lines(self) -> list[str]:
        lines = []
        if self.trainer:
            lines.append(
                "trainer: {strategy}, {num_replicas} replica(s), batch {global_batch_size}, "
                "jit_compile={jit_compile}, precision={precision}".format(**self.trainer)
            )
        if self.tuning:
            lines.append(self.tuning.to_text())
        return lines

    @text_lines(25)  # after the Evaluator's calibration line: the fit is what corrects it
    def temperature_lines(self) -> list[str]:
        fit = self.temperature_fit()
        return [fit.describe()] if fit else []
