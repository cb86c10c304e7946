"""The image-classification task: the datasets and the model of one training, and its loop.

Model Garden keeps the task (inputs, model) apart from the loop that runs it; here
`build_inputs` and `build_model` are the task, and `train_model` runs the loop over it
(`fine_tune.train_in_phases`: one phase, or a pretrained backbone's two, each through
`loop.train`). The Trainer and every Tuner trial call the three in that order (`fit`),
so a trial trains exactly as the Trainer will. Each step returns what training_info
records of it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras
from absl import logging
from tpu_pipeline.common.config import DatasetConfig, TrainerConfig
from tpu_pipeline.common.tfx_api import FnArgs
from tpu_pipeline.components.device.multi_worker import lost_worker_is_an_error, worker_output_dir
from tpu_pipeline.components.device.policy import TrainingPolicy, resolve_training_policy
from tpu_pipeline.components.device.strategy import StrategyChoice, resolve_strategy
from tpu_pipeline.components.models import build_model as build_network
from tpu_pipeline.components.models import is_backbone, load_pretrained_weights
from tpu_pipeline.components.training.augmentation import Augmentation
from tpu_pipeline.components.training.class_weights import balanced_class_weights
from tpu_pipeline.components.training.fine_tune import describe_phases, train_in_phases
from tpu_pipeline.components.training.input_pipeline import (
    EvalInput,
    count_labels,
    distributed_training_dataset,
    global_batch_size,
    make_eval_dataset,
    steps_per_epoch,
)
from tpu_pipeline.components.training.learning_rate import peak_learning_rate
from tpu_pipeline.components.training.pruning import prune_for_training, strip_pruned
from tpu_pipeline.components.training.training_logs import write_run_summaries
from tpu_pipeline.components.training.warm_start import warm_start


@dataclasses.dataclass(frozen=True)
class TrainingSetup:
    """What every training of one Trainer or Tuner run shares: data, device, Transform graph.

    Resolved once per process (a TPU is connected to once), whether it then
    trains once (the Trainer) or once per trial (the Tuner).
    """

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


@dataclasses.dataclass(frozen=True)
class Inputs:
    """The datasets of one training, and the device policy and sizes they were made for."""

    policy: TrainingPolicy
    batch_size: int  # global: every replica's batch together
    steps_per_epoch: int
    epochs: int
    train: tf.distribute.DistributedDataset | tf.data.Dataset
    eval: EvalInput
    augmentation: Augmentation
    class_weights: tuple[float, ...] | None

    @property
    def train_steps(self) -> int:
        return self.steps_per_epoch * self.epochs


def build_inputs(setup: TrainingSetup, config: TrainerConfig, train_steps: int | None) -> Inputs:
    """The training and eval datasets, for the device's policy and replicas.

    It seeds every random choice after it, so the same data and configuration make the
    same model (the shuffles here, the initial weights in `build_model`).

    Args:
      setup: data, device and Transform graph, resolved once per process.
      config: the Trainer settings (with a trial's or the best values applied).
      train_steps: batches in all, split over `config.epochs`; None trains
        `config.epochs` passes over the training data.

    Raises:
      ValueError: the eval split is empty (nothing to validate on).
    """
    tf_keras.utils.set_random_seed(config.seed)
    dataset, choice = setup.dataset, setup.choice
    policy = resolve_training_policy(choice.device, choice.num_replicas, config)
    augmentation = Augmentation.from_config(config, dataset)
    # One pass over the labels, only when asked: the report reads the mix from the statistics.
    class_weights = None
    if config.class_weight == "balanced":
        class_weights = balanced_class_weights(count_labels(setup.train_files, dataset))
    batch_size = global_batch_size(config.per_replica_batch_size, choice.num_replicas)
    epoch_steps = steps_per_epoch(config.epochs, train_steps, setup.train_files, batch_size)
    eval_input = make_eval_dataset(
        setup.eval_files, setup.transform_output, dataset, batch_size, max_batches=setup.eval_steps
    )
    if eval_input.dataset is None:
        raise ValueError(f"the eval split is empty ({setup.eval_files}): nothing to validate on")
    train_dataset = distributed_training_dataset(
        choice.strategy,
        setup.train_files,
        setup.transform_output,
        dataset,
        batch_size,
        shuffle_buffer=config.shuffle_buffer,
        seed=config.seed,
        augmentation=augmentation,
        class_weights=class_weights,
    )
    return Inputs(
        policy,
        batch_size,
        epoch_steps,
        config.epochs,
        train_dataset,
        eval_input,
        augmentation,
        class_weights,
    )


def describe_training(
    setup: TrainingSetup, config: TrainerConfig, inputs: Inputs
) -> dict[str, Any]:
    """How the model trains (device, strategy, replicas, XLA, precision, batch, schedule, ...):
    the start of training_info, logged and written to TensorBoard before training."""
    choice, policy = setup.choice, inputs.policy
    info: dict[str, Any] = {}
    if _phased(config):
        info["fine_tuning"] = describe_phases(config, inputs.batch_size)
    info |= {
        "device": choice.device,
        "strategy": choice.description,
        "num_replicas": choice.num_replicas,
        "num_workers": choice.num_workers,
        "jit_compile": policy.jit_compile,
        "precision": policy.precision,
        "steps_per_execution": policy.steps_per_execution,
        "loop": config.loop,
        "global_batch_size": inputs.batch_size,
        "model": config.model,
        "train_steps": inputs.train_steps,
        "epochs": config.epochs,
        "optimizer": config.optimizer,
        "peak_learning_rate": peak_learning_rate(config, inputs.batch_size),
        "learning_rate_decay": config.learning_rate_decay,
        "augmentation": dataclasses.asdict(inputs.augmentation),
        "class_weights": inputs.class_weights,
        "tensorflow": tf.__version__,
    }
    return info


def _phased(config: TrainerConfig) -> bool:
    """Whether a pretrained backbone trains in phases (`fine_tune.py`)."""
    return is_backbone(config.model) and config.frozen_backbone_epochs > 0


def build_model(
    setup: TrainingSetup, config: TrainerConfig, inputs: Inputs, base_model: str | None = None
) -> tuple[tf_keras.Model, dict[str, Any]]:
    """The model, built once under the strategy: pretrained or warm-started, and wrapped for
    pruning if asked (`train_model` compiles it, once per phase).

    Returns:
      The model, and what training_info records of its weights (pretrained file and
      hash for a backbone, whether it was warm-started).
    """
    dataset, policy = setup.dataset, inputs.policy
    facts: dict[str, Any] = {}
    with setup.choice.strategy.scope():
        model = build_network(
            config.model, dataset.image_shape, dataset.num_classes, policy.precision, config.dropout
        )
        if is_backbone(config.model):
            # Only backbones record it: other models' training_info stays as it was.
            loaded = load_pretrained_weights(model, config, dataset.image_shape)
            facts["pretrained_weights"] = loaded.path if loaded else None
            facts["pretrained_weights_sha256"] = loaded.sha256 if loaded else None
        # The last blessed model trained on this data already: its weights win over pretrained ones.
        # Before pruning wraps the layers: the base model is a plain (stripped) one.
        facts["warm_started"] = bool(base_model) and warm_start(model, base_model)
        if config.pruning:
            model = prune_for_training(model, config.pruning, inputs.train_steps)
    return model, facts


def fit(
    setup: TrainingSetup,
    config: TrainerConfig,
    *,
    train_steps: int | None,
    log_dir: str,
    backup_dir: str,
    base_model: str | None = None,
) -> tuple[tf_keras.Model, tf_keras.callbacks.History, dict[str, Any]]:
    """Datasets, model and loop: the one training path, which `run_fn` takes once and the
    Tuner once per trial.

    Args:
      setup: data, device and Transform graph, resolved once per process.
      config: the Trainer settings (with a trial's or the best values applied).
      train_steps: batches in all, split over `config.epochs`; None trains
        `config.epochs` passes over the training data.
      log_dir: TensorBoard run folder (the chief's; other workers log into scratch).
      backup_dir: where BackupAndRestore keeps the last finished epoch.
      base_model: a SavedModel to warm-start from.

    Returns:
      The trained model (pruning wrappers stripped), its Keras history, and how
      it was trained (device, strategy, replicas, XLA, precision, batch, pruning, ...).
    """
    inputs = build_inputs(setup, config, train_steps)
    training_info = describe_training(setup, config, inputs)
    model, weights = build_model(setup, config, inputs, base_model)
    return train_model(
        model,
        setup,
        config,
        inputs,
        {**training_info, **weights},
        log_dir=log_dir,
        backup_dir=backup_dir,
    )


def train_model(
    model: tf_keras.Model,
    setup: TrainingSetup,
    config: TrainerConfig,
    inputs: Inputs,
    training_info: dict[str, Any],
    *,
    log_dir: str,
    backup_dir: str,
) -> tuple[tf_keras.Model, tf_keras.callbacks.History, dict[str, Any]]:
    """Compiles the model and runs the loop over `inputs` (Keras's fit or the custom loop),
    phase by phase for a pretrained backbone; writes the run's TensorBoard summaries first.

    Returns:
      The trained model (pruning wrappers stripped: what is exported, tuned or warm-started
      from is the plain model), its Keras history, and `training_info` with its pruning.
    """
    logging.info("Trainer setup: %s", training_info)
    choice = setup.choice
    # Only the chief's logs are kept; other workers log into a scratch folder.
    with worker_output_dir(log_dir, choice.is_chief) as log_dir:
        images, labels, *_ = next(iter(inputs.eval.dataset))
        write_run_summaries(log_dir, images, training_info, labels, setup.dataset.class_names)
        with lost_worker_is_an_error(choice.num_workers, backup_dir):
            history = train_in_phases(
                model,
                inputs.train,
                inputs.eval,
                strategy=choice.strategy,
                policy=inputs.policy,
                config=config,
                steps_per_epoch=inputs.steps_per_epoch,
                batch_size=inputs.batch_size,
                log_dir=log_dir,
                backup_dir=backup_dir,
                is_chief=choice.is_chief,
            )
    if config.pruning:
        model, pruning = strip_pruned(model, config.pruning, inputs.train_steps)
        training_info = {**training_info, "pruning": pruning}
    return model, history, training_info
