"""Reads a Tuner's outputs back: every trial (values, objective, time) and the chosen one.

TFX writes the chosen values (`best_hyperparameters`) and the finished trials,
best first (`tuner_results`); each trial wrote its own record beside its
TensorBoard run (`tpu_pipeline.components.tuner`), which adds the time, failed trials and
where its logs are.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib

from ml_metadata.proto import metadata_store_pb2

from tpu_pipeline.components.training.hyperparameters import (
    TRIAL_RECORD,
    TRIALS_SUBDIR,
    describe_values,
    tuned_values,
)

TFX_RESULTS_FILE = "tuner_results.json"


@dataclasses.dataclass
class TrialResult:
    trial_id: str
    status: str  # KerasTuner's: COMPLETED, INVALID, FAILED, ...
    hyperparameters: dict[str, object]
    objective: str
    value: float | None
    seconds: float
    log_dir: str  # the trial's TensorBoard run


@dataclasses.dataclass
class TuningResult:
    objective: str
    chosen_trial_id: str | None
    chosen_hyperparameters: dict[str, object]  # what the Trainer trained with
    trials: list[TrialResult]

    def to_text(self) -> str:
        """One line: how many trials, the chosen one and its values."""
        chosen = next((t for t in self.trials if t.trial_id == self.chosen_trial_id), None)
        score = f" {chosen.objective}={chosen.value:.4f}" if chosen and chosen.value else ""
        return (
            f"tuning: {len(self.trials)} trial(s), chose trial {self.chosen_trial_id}"
            f"{score} ({describe_values(self.chosen_hyperparameters)})"
        )


def _only_file(artifact: metadata_store_pb2.Artifact) -> pathlib.Path:
    (path,) = [p for p in pathlib.Path(artifact.uri).iterdir() if p.is_file()]
    return path


def trials_dir(tuner_results: metadata_store_pb2.Artifact) -> pathlib.Path:
    """The folder of the trials' records and TensorBoard runs, one subfolder each."""
    return pathlib.Path(tuner_results.uri) / TRIALS_SUBDIR


def read_tuning(
    tuner_results: metadata_store_pb2.Artifact, best_hyperparameters: metadata_store_pb2.Artifact
) -> TuningResult:
    """Every trial in id order, and the best one (the first TFX lists)."""
    ranked = json.loads((pathlib.Path(tuner_results.uri) / TFX_RESULTS_FILE).read_text())
    best = json.loads(_only_file(best_hyperparameters).read_text())
    trials = []
    for path in sorted(trials_dir(tuner_results).glob(f"*/{TRIAL_RECORD}")):
        record = json.loads(path.read_text())
        trials.append(
            TrialResult(
                trial_id=record["trial_id"],
                status=record["status"],
                hyperparameters=record["hyperparameters"],
                objective=record["objective"],
                value=record["value"],
                seconds=record["seconds"],
                log_dir=str(path.parent),
            )
        )
    return TuningResult(
        objective=trials[0].objective if trials else "",
        chosen_trial_id=ranked[0]["trial_id"] if ranked else None,
        chosen_hyperparameters=tuned_values(best["values"]),
        trials=trials,
    )
