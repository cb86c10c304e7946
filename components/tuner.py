"""The Tuner's `tuner_fn`: the Trainer's own training, run once per trial by KerasTuner.

Every trial trains through `tpu_pipeline.components.training.task.fit`, the function `run_fn` calls,
so a trial measures the model, input pipeline, strategy and XLA/precision policy
the Trainer really uses; only the TrainerConfig fields of `tuner.search_space`
change, and a trial trains for the Tuner's step budget (its TrainArgs,
`tuner.trial_steps`). KerasTuner's oracles choose the values (random, Hyperband,
Bayesian). Each trial writes its TensorBoard run and a record (values, objective,
seconds) under the Tuner's `tuner_results` output, which the run summary and the
report read back; on Vertex AI the trials of every worker write there too.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import keras_tuner
import tensorflow as tf
from absl import logging
from keras_tuner.engine import base_tuner
from keras_tuner.engine import trial as trial_lib

from tpu_pipeline.common.config import TunerConfig
from tpu_pipeline.common.tfx_api import (
    FnArgs,
    Tuner,
    TunerFnResult,
    artifact_utils,
    executor_spec,
    json_utils,
    standard_component_specs,
    tfx_tuner_executor,
)
from tpu_pipeline.components.contract import read_dataset, read_trainer, read_tuner
from tpu_pipeline.components.preflight import require_preflight
from tpu_pipeline.components.training.autograph import skip_autograph_for_graph_safe_code
from tpu_pipeline.components.training.hyperparameters import (
    TRIAL_RECORD,
    TRIALS_SUBDIR,
    apply_hyperparameters,
    describe_values,
    trial_dir,
    tuned_values,
)
from tpu_pipeline.components.training.setup import TrainingSetup, training_setup
from tpu_pipeline.components.training.task import fit

# The custom_config entry the Tuner's executor adds: the folder trials write into.
TRIALS_DIR_KEY = "trials_dir"
OBJECTIVE_DIRECTIONS = {"val_accuracy": "max", "val_loss": "min"}
HYPERBAND_EPOCHS = "tuner/epochs"  # Hyperband's budget for one trial, in epochs


def search_space(config: TunerConfig) -> keras_tuner.HyperParameters:
    """KerasTuner's hyperparameters for `tuner.search_space`, one per TrainerConfig field."""
    space = keras_tuner.HyperParameters()
    for name, dimension in config.search_space.items():
        if dimension.values is not None:
            space.Choice(name, list(dimension.values))
            continue
        bounds = dict(step=dimension.step, sampling=dimension.sampling)
        if all(isinstance(v, int) for v in (dimension.min, dimension.max, dimension.step or 1)):
            space.Int(name, dimension.min, dimension.max, **bounds)
        else:
            space.Float(name, dimension.min, dimension.max, **bounds)
    return space


def build_oracle(config: TunerConfig, epochs: int, seed: int) -> keras_tuner.Oracle:
    """The search algorithm; Hyperband's largest budget is the Trainer's `epochs`."""
    common = dict(
        objective=keras_tuner.Objective(config.objective, OBJECTIVE_DIRECTIONS[config.objective]),
        hyperparameters=search_space(config),
        seed=seed,
    )
    if config.algorithm == "hyperband":
        return keras_tuner.oracles.HyperbandOracle(max_epochs=epochs, **common)
    if config.algorithm == "bayesian":
        return keras_tuner.oracles.BayesianOptimizationOracle(
            max_trials=config.max_trials, **common
        )
    return keras_tuner.oracles.RandomSearchOracle(max_trials=config.max_trials, **common)


def with_trials_dir(
    exec_properties: dict[str, Any], output_dict: dict[str, list[Any]]
) -> dict[str, Any]:
    """The Tuner's properties, with `trials_dir` (inside its `tuner_results`) in custom_config.

    Only the executor knows where outputs go. Trials write there directly, so
    nothing is lost with a temporary folder or a Vertex AI worker's disk.
    """
    key = standard_component_specs.CUSTOM_CONFIG_KEY
    custom_config = json_utils.loads(exec_properties.get(key) or "null") or {}
    results = artifact_utils.get_single_uri(output_dict[standard_component_specs.TUNER_RESULTS_KEY])
    custom_config[TRIALS_DIR_KEY] = os.path.join(results, TRIALS_SUBDIR)
    return {**exec_properties, key: json_utils.dumps(custom_config)}


class TrialsDirMixin:
    """Makes a TFX Tuner executor (local or Vertex AI) tell trials where to write records."""

    def Do(
        self,
        input_dict: dict[str, list[Any]],
        output_dict: dict[str, list[Any]],
        exec_properties: dict[str, Any],
    ) -> None:
        super().Do(input_dict, output_dict, with_trials_dir(exec_properties, output_dict))


class TrialRecordingExecutor(TrialsDirMixin, tfx_tuner_executor.Executor):
    """TFX's Tuner executor, with `trials_dir` in the custom_config."""


class RecordingTuner(Tuner):
    """TFX's Tuner component, run by `TrialRecordingExecutor`."""

    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(TrialRecordingExecutor)


class PipelineTuner(base_tuner.BaseTuner):
    """Runs each trial as a short Trainer run and records it for the summary and TensorBoard."""

    def __init__(self, oracle: keras_tuner.Oracle, fn_args: FnArgs):
        super().__init__(oracle, directory=fn_args.working_dir, project_name="search")
        self._fn_args = fn_args
        self._dataset = read_dataset(fn_args.custom_config)
        self._trainer_config = read_trainer(fn_args.custom_config)
        self._trials_dir = fn_args.custom_config[TRIALS_DIR_KEY]
        # Resolved by the first trial, not here: a parallel search's chief process
        # only runs the oracle and must not claim the accelerator.
        self._setup: TrainingSetup | None = None
        self._started: dict[str, float] = {}
        self._metrics: dict[str, dict[str, float]] = {}
        self._last_error: str | None = None

    def run_trial(self, trial: trial_lib.Trial, **_: Any) -> dict[str, float]:
        """Trains with the trial's values for the step budget; returns the last epoch's metrics."""
        values = trial.hyperparameters.values
        config = apply_hyperparameters(self._trainer_config, tuned_values(values))
        if self._setup is None:
            self._setup = training_setup(self._fn_args, self._dataset, self._trainer_config)
        setup = self._setup
        if setup.choice.device == "tpu" and config.tpu_preflight:
            # As in run_fn: a trial whose step cannot compile fails in seconds, by name.
            require_preflight(
                setup.dataset, config, setup.choice.num_replicas, setup.transform_output
            )
        steps_per_epoch = max(1, self._fn_args.train_steps // config.epochs)
        epochs = int(values.get(HYPERBAND_EPOCHS, config.epochs))
        _, history, _ = fit(
            self._setup,
            config.model_copy(update={"epochs": epochs}),
            train_steps=steps_per_epoch * epochs,
            log_dir=trial_dir(self._trials_dir, trial.trial_id),
            backup_dir=os.path.join(self._fn_args.working_dir, "backup", trial.trial_id),
        )
        metrics = {name: float(series[-1]) for name, series in history.history.items()}
        self._metrics[trial.trial_id] = metrics
        return metrics

    def on_trial_begin(self, trial: trial_lib.Trial) -> None:
        self._started[trial.trial_id] = time.perf_counter()

    def on_trial_end(self, trial: trial_lib.Trial) -> None:
        """Reports the trial to the oracle, then writes its record beside its TensorBoard run."""
        super().on_trial_end(trial)
        seconds = time.perf_counter() - self._started.pop(trial.trial_id)
        metrics = self._metrics.pop(trial.trial_id, {})
        objective = self.oracle.objective.name
        failed = trial.status != trial_lib.TrialStatus.COMPLETED
        if failed:
            self._last_error = trial.message
        record = {
            "trial_id": trial.trial_id,
            "status": trial.status,
            "hyperparameters": tuned_values(trial.hyperparameters.values),
            "objective": objective,
            "value": metrics.get(objective),
            "seconds": round(seconds, 2),
            "metrics": metrics,
            "error": trial.message if failed else None,
        }
        path = os.path.join(trial_dir(self._trials_dir, trial.trial_id), TRIAL_RECORD)
        tf.io.gfile.makedirs(os.path.dirname(path))
        with tf.io.gfile.GFile(path, "w") as handle:
            handle.write(json.dumps(record, indent=2, sort_keys=True))
        # The local runner shows this line on the terminal, one per trial.
        logging.info(
            "trial %s: %s=%s (%.1f s) %s",
            trial.trial_id,
            objective,
            "failed" if failed else f"{record['value']:.4g}",
            seconds,
            describe_values(record["hyperparameters"]),
        )

    def on_search_end(self) -> None:
        """Fails the search, with the reason, when no trial finished."""
        # The oracle lists unfinished trials after the finished ones, never none at all.
        best = self.oracle.get_best_trials(1)
        if not best or best[0].status != trial_lib.TrialStatus.COMPLETED:
            raise RuntimeError(
                f"no tuner trial finished; the last one failed with:\n{self._last_error}"
            )

    def search_space_summary(self, extended: bool = False) -> None:
        """Logs the space instead of printing it: the terminal shows progress lines only."""
        logging.info(
            "Tuner search space: %s", [p.get_config() for p in self.oracle.get_space().space]
        )

    def results_summary(self, num_trials: int = 10) -> None:
        """Logs the best trials instead of printing them."""
        for trial in self.oracle.get_best_trials(num_trials):
            logging.info(
                "Tuner result: trial %s, score %s, %s",
                trial.trial_id,
                trial.score,
                trial.hyperparameters.values,
            )

    def save_model(self, trial_id: str, model: Any, step: int = 0) -> None:
        """Keeps no trial model: the Trainer retrains with the best values."""

    def load_model(self, trial: trial_lib.Trial) -> None:
        raise NotImplementedError(
            "trial models are not kept; the Trainer retrains with the best values"
        )


def tuner_fn(fn_args: FnArgs) -> TunerFnResult:
    """TFX's entry point: a KerasTuner search whose trials train like the Trainer."""
    skip_autograph_for_graph_safe_code()
    config = read_tuner(fn_args.custom_config)
    trainer_config = read_trainer(fn_args.custom_config)
    oracle = build_oracle(config, trainer_config.epochs, trainer_config.seed)
    # verbose=0 quiets KerasTuner's own display, which prints to stdout.
    return TunerFnResult(tuner=PipelineTuner(oracle, fn_args), fit_kwargs={"verbose": 0})
