"""The image-classification task: one training, from its datasets to the trained model.

Model Garden keeps the task (inputs, model) apart from the loop that runs it. Here
`fit` is the task, read top to bottom: the datasets (`build_inputs`), the model
(built under the strategy, its data-computed layers set from training images,
pretrained or warm-started, wrapped for pruning), what training_info records of it,
and the loop (`fine_tune.train_in_phases`: one phase, or a pretrained backbone's two,
each through `loop.train`) in the worker's log folder. Each step is one call into the
module of its concern, made once and in that order. The Trainer's `run_fn` calls `fit`
once; the Tuner once per trial, so a trial trains exactly as the Trainer will.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import tensorflow as tf
import tf_keras

from tpu_pipeline.common.config import TrainerConfig
from tpu_pipeline.components.device.multi_worker import lost_worker_is_an_error, worker_output_dir
from tpu_pipeline.components.device.policy import TrainingPolicy, resolve_training_policy
from tpu_pipeline.components.models import build_model as build_network
from tpu_pipeline.components.models import (
    initialize_from_data,
    is_backbone,
    load_pretrained_weights,
    needs_data_to_initialize,
)
from tpu_pipeline.components.training.augmentation import Augmentation
from tpu_pipeline.components.training.class_weights import balanced_class_weights
from tpu_pipeline.components.training.fine_tune import train_in_phases
from tpu_pipeline.components.training.input_pipeline import (
    EvalInput,
    count_labels,
    distributed_training_dataset,
    global_batch_size,
    make_eval_dataset,
    sample_images,
    steps_per_epoch,
)
from tpu_pipeline.components.training.pruning import (
    prune_for_training,
    pruning_callbacks,
    strip_pruned,
)
from tpu_pipeline.components.training.setup import TrainingSetup
from tpu_pipeline.components.training.warm_start import warm_start

# Training images a data-initialized layer (a whitening layer) is computed from.
INITIALIZING_IMAGES = 5000


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
    same model (the shuffles here, the initial weights `fit` builds next).

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
      The trained model (pruning wrappers stripped: what is exported, tuned or
      warm-started from is the plain model), its Keras history, and how it was trained
      (device, strategy, replicas, XLA, precision, batch, schedule, weights, pruning, ...).
    """
    inputs = build_inputs(setup, config, train_steps)
    choice, dataset, policy = setup.choice, setup.dataset, inputs.policy
    training_info: dict[str, Any] = {}
    # The model, built once under the strategy (`train_in_phases` compiles it, once per phase).
    with choice.strategy.scope():
        model = build_network(
            config.model, dataset.image_shape, dataset.num_classes, policy.precision, config.dropout
        )
        if needs_data_to_initialize(config.model):  # e.g. a whitening layer
            images = sample_images(
                setup.train_files, setup.transform_output, dataset, INITIALIZING_IMAGES
            )
            initialize_from_data(config.model, model, images)
        if is_backbone(config.model):
            # Only backbones record it: other models' training_info stays as it was.
            loaded = load_pretrained_weights(model, config, dataset.image_shape)
            training_info["pretrained_weights"] = loaded.path if loaded else None
            training_info["pretrained_weights_sha256"] = loaded.sha256 if loaded else None
        # The last blessed model trained on this data already: its weights win over pretrained
        # ones. Before pruning wraps the layers: the base model is a plain (stripped) one.
        training_info["warm_started"] = bool(base_model) and warm_start(model, base_model)
        callbacks = ()
        if config.pruning:
            model = prune_for_training(model, config.pruning, inputs.train_steps)
            callbacks = tuple(pruning_callbacks(config.pruning))
    # How the model trains: `train_in_phases` adds the schedule, logs it and writes it to
    # TensorBoard before the first epoch.
    training_info |= {
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
        "learning_rate_decay": config.learning_rate_decay,
        "label_smoothing": config.label_smoothing,
        "weight_averaging": config.weight_averaging,
        "test_time_flip": config.test_time_flip,
        "augmentation": dataclasses.asdict(inputs.augmentation),
        "class_weights": inputs.class_weights,
        "tensorflow": tf.__version__,
    }
    # Only the chief's logs are kept; other workers log into a scratch folder.
    with (
        worker_output_dir(log_dir, choice.is_chief) as log_dir,
        lost_worker_is_an_error(choice.num_workers, backup_dir),
    ):
        history = train_in_phases(
            model,
            inputs.train,
            inputs.eval,
            strategy=choice.strategy,
            policy=policy,
            config=config,
            steps_per_epoch=inputs.steps_per_epoch,
            batch_size=inputs.batch_size,
            log_dir=log_dir,
            backup_dir=backup_dir,
            is_chief=choice.is_chief,
            callbacks=callbacks,
            training_info=training_info,
            class_names=dataset.class_names,
        )
    if config.pruning:
        model, pruning = strip_pruned(model, config.pruning, inputs.train_steps)
        training_info["pruning"] = pruning
    return model, history, training_info
