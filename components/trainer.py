"""The Trainer's `run_fn`: strategy -> datasets -> model -> fit or custom loop -> export.

Each step is a function of its own module, so a test can call any of them
alone; `run_fn` only reads TFX's arguments and passes results along. `fit` is
the training itself, shared with the Tuner (`components.tuner`), whose trials
train exactly as the Trainer will.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_transform as tft
import tf_keras
from absl import logging

from common.config import DatasetConfig, ExplainConfig, TrainerConfig
from common.tfx_api import FnArgs
from components.contract import read_dataset, read_explain, read_serving, read_trainer
from components.device.multi_worker import (
    lost_worker_is_an_error,
    wait_for_all_workers,
    worker_output_dir,
)
from components.device.policy import resolve_training_policy
from components.device.strategy import StrategyChoice, resolve_strategy
from components.explain.eval_split import explain_eval_split
from components.models import build_model, compile_model, is_backbone, load_pretrained_weights
from components.preflight import require_preflight
from components.serving.eval_outcomes import record_eval_outcomes
from components.serving.export import feature_map_layer
from components.serving.model_folder import write_model_folder
from components.training.augmentation import Augmentation
from components.training.autograph import skip_autograph_for_tf_keras
from components.training.class_weights import balanced_class_weights
from components.training.fine_tune import describe_phases, train_fine_tuned
from components.training.hyperparameters import apply_hyperparameters, tuned_values
from components.training.input_pipeline import (
    count_labels,
    distributed_training_dataset,
    global_batch_size,
    make_eval_dataset,
)
from components.training.learning_rate import make_optimizer, peak_learning_rate
from components.training.loop import steps_per_epoch, train
from components.training.pruning import prune_for_training, strip_pruned
from components.training.separate_process import TrainingRequest, train_in_child, trains_in_child
from components.training.training_logs import backup_dir_for, write_run_summaries
from components.training.warm_start import warm_start


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
    """Resolves the device and reads the Transform graph from TFX's arguments."""
    return TrainingSetup(
        dataset=dataset,
        choice=resolve_strategy(config),
        transform_output=tft.TFTransformOutput(fn_args.transform_graph_path),
        train_files=fn_args.train_files,
        eval_files=fn_args.eval_files,
        eval_steps=fn_args.eval_steps,
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
    """Builds the datasets and the model under the device's policy and trains them.

    The one training path: `run_fn` calls it once, the Tuner once per trial.

    Args:
      setup: data, device and Transform graph, resolved once per process.
      config: the Trainer settings (with a trial's or the best values applied).
      train_steps: batches in all, split over `config.epochs`; None trains
        `config.epochs` passes over the training data.
      log_dir: TensorBoard run folder.
      backup_dir: where BackupAndRestore keeps the last finished epoch.
      base_model: a SavedModel to warm-start from.

    Returns:
      The trained model (pruning wrappers stripped), its Keras history, and how
      it was trained (device, strategy, replicas, XLA, precision, batch, pruning, ...).
    """
    tf_keras.utils.set_random_seed(config.seed)  # same data + config -> same model
    dataset, choice = setup.dataset, setup.choice
    policy = resolve_training_policy(choice.device, choice.num_replicas, config)
    batch_size = global_batch_size(config.per_replica_batch_size, choice.num_replicas)
    epoch_steps = steps_per_epoch(config.epochs, train_steps, setup.train_files, batch_size)
    augmentation = Augmentation.from_config(config, dataset)
    # One pass over the labels, only when asked: the report reads the mix from the statistics.
    class_weights = None
    if config.class_weight == "balanced":
        class_weights = balanced_class_weights(count_labels(setup.train_files, dataset))
    training_info = {
        "device": choice.device,
        "strategy": choice.description,
        "num_replicas": choice.num_replicas,
        "num_workers": choice.num_workers,
        "jit_compile": policy.jit_compile,
        "precision": policy.precision,
        "steps_per_execution": policy.steps_per_execution,
        "loop": config.loop,
        "global_batch_size": batch_size,
        "model": config.model,
        "train_steps": epoch_steps * config.epochs,
        "epochs": config.epochs,
        "optimizer": config.optimizer,
        "peak_learning_rate": peak_learning_rate(config, batch_size),
        "learning_rate_decay": config.learning_rate_decay,
        "augmentation": dataclasses.asdict(augmentation),
        "class_weights": class_weights,
        "tensorflow": tf.__version__,
    }
    phased = is_backbone(config.model) and config.frozen_backbone_epochs > 0
    if phased:
        training_info["fine_tuning"] = describe_phases(config, batch_size)
    logging.info("Trainer setup: %s", training_info)

    if choice.device == "tpu" and config.tpu_preflight:
        # A step that cannot compile fails here in seconds, naming the layer, not on the TPU.
        require_preflight(dataset, config, choice.num_replicas, setup.transform_output)
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
    eval_input = make_eval_dataset(
        setup.eval_files,
        setup.transform_output,
        dataset,
        batch_size,
        max_batches=setup.eval_steps,
    )
    if eval_input.dataset is None:
        raise ValueError(f"the eval split is empty ({setup.eval_files}): nothing to validate on")
    images, labels, *_ = next(iter(eval_input.dataset))
    write_run_summaries(log_dir, images, training_info, labels, dataset.class_names)

    with choice.strategy.scope():
        model = build_model(
            config.model, dataset.image_shape, dataset.num_classes, policy.precision, config.dropout
        )
        if is_backbone(config.model):
            # Only backbones record it: other models' training_info stays as it was.
            loaded = load_pretrained_weights(model, config, dataset.image_shape)
            training_info["pretrained_weights"] = loaded.path if loaded else None
            training_info["pretrained_weights_sha256"] = loaded.sha256 if loaded else None
        # The last blessed model trained on this data already: its weights win over pretrained ones.
        # Before pruning wraps the layers: the base model is a plain (stripped) one.
        training_info["warm_started"] = bool(base_model) and warm_start(model, base_model)
        if config.pruning:
            model = prune_for_training(model, config.pruning, epoch_steps * config.epochs)
        optimizer = make_optimizer(config, batch_size, epoch_steps, epoch_steps * config.epochs)
        compile_model(
            model, optimizer, policy.jit_compile, policy.precision, policy.steps_per_execution
        )
    training = {
        "strategy": choice.strategy,
        "policy": policy,
        "config": config,
        "steps_per_epoch": epoch_steps,
        "batch_size": batch_size,
        "log_dir": log_dir,
        "backup_dir": backup_dir,
    }
    with lost_worker_is_an_error(choice.num_workers, backup_dir):
        if phased:  # each phase compiles the model anew, with its own optimizer
            history = train_fine_tuned(
                model, train_dataset, eval_input, is_chief=choice.is_chief, **training
            )
        else:
            history = train(model, train_dataset, eval_input, **training)
    if config.pruning:  # what is exported, tuned or warm-started from is the plain model
        model, training_info["pruning"] = strip_pruned(
            model, config.pruning, epoch_steps * config.epochs
        )
    return model, history, training_info


def require_grad_cam_layer(explain: ExplainConfig, model_name: str, dataset: DatasetConfig) -> None:
    """Fails before training, not after it, when Grad-CAM is asked for and the model has no
    layer to read (a misnamed `explain.grad_cam_layer`, or no feature maps at all).

    Raises:
      ValueError: naming the problem and what to set instead.
    """
    wanted = explain.enabled and explain.method_for(dataset.stores_encoded_images) == "grad_cam"
    if not wanted and explain.grad_cam_layer is None:
        return
    model = build_model(model_name, dataset.image_shape, dataset.num_classes, "float32")
    if feature_map_layer(model, explain.grad_cam_layer) is None:
        raise ValueError(
            f"explain.method grad_cam needs a feature-map layer, and {model_name} has none: "
            "use explain.method=xrai or integrated_gradients"
        )


def train_here(request: TrainingRequest) -> tuple[list[np.ndarray], dict[str, Any], StrategyChoice]:
    """Trains in this process, as `request` asks: the trained weights (read on every worker),
    how the model was trained, and the device and strategy it trained on.

    `run_fn` calls it, or the training child (`components/trainer_child.py`) does.
    """
    dataset = read_dataset(request.custom_config)
    config = apply_hyperparameters(read_trainer(request.custom_config), request.tuned)
    setup = training_setup(request.fn_args(), dataset, config)
    require_grad_cam_layer(read_explain(request.custom_config), config.model, dataset)
    # Only the chief's logs are kept; other workers log into a scratch folder.
    with worker_output_dir(request.log_dir, setup.choice.is_chief) as log_dir:
        model, _, training_info = fit(
            setup,
            config,
            train_steps=request.train_steps,
            log_dir=log_dir,
            backup_dir=request.backup_dir,
            base_model=request.base_model,
        )
    # On every worker: reading sync-on-read weights (BatchNorm statistics) is a collective.
    return model.get_weights(), training_info, setup.choice


def run_fn(fn_args: FnArgs) -> None:
    """Trains the configured CNN on the best device available and exports it for serving.

    With a Tuner upstream, `fn_args.hyperparameters` holds the best trial's values,
    which replace their TrainerConfig fields. The training runs in this process or in
    a child (`trainer.training_process`); the export always runs here.
    """
    skip_autograph_for_tf_keras()
    dataset, config = read_dataset(fn_args.custom_config), read_trainer(fn_args.custom_config)
    tuned = tuned_values(fn_args.hyperparameters["values"]) if fn_args.hyperparameters else {}
    config = apply_hyperparameters(config, tuned)
    explain = read_explain(fn_args.custom_config)
    request = TrainingRequest.from_fn_args(
        fn_args,
        tuned,
        backup_dir=backup_dir_for(
            fn_args.model_run_dir,
            {
                "train_files": fn_args.train_files,
                "transform": fn_args.transform_graph_path,
                "custom_config": fn_args.custom_config,
                "hyperparameters": tuned,
                "train_steps": fn_args.train_steps,
            },
        ),
    )
    choice = None  # a child trained as the only worker, the chief
    if trains_in_child(config, dataset):
        trained = train_in_child(request)
        weights, training_info = trained.weights, trained.training_info
    else:
        weights, training_info, choice = train_here(request)
        if not choice.is_chief:
            # TFX checks on every worker that the model exists: return after the chief exported it.
            wait_for_all_workers(choice.strategy)
            return
    training_info["training_process"] = "same" if choice else "child"
    if tuned:
        training_info["hyperparameters"] = tuned
    serving = read_serving(fn_args.custom_config)
    exported = write_model_folder(
        weights,
        config.model,
        tft.TFTransformOutput(fn_args.transform_graph_path),
        dataset,
        serving,
        export_dir=fn_args.serving_model_dir,
        train_files=fn_args.train_files,
        eval_files=fn_args.eval_files,
        training_info=training_info,
        grad_cam_layer=explain.grad_cam_layer,
    )
    if choice and choice.num_workers > 1:
        wait_for_all_workers(choice.strategy)  # the other workers wait for this export
    # After the other workers are released: these take no collective, only time.
    # Each eval example's outcome, for `runs diff` (which examples flipped between runs).
    record_eval_outcomes(
        fn_args.model_run_dir, exported, fn_args.eval_files, dataset, serving.measured_examples
    )
    explain_eval_split(
        fn_args.model_run_dir,
        exported,
        fn_args.eval_files,
        dataset,
        explain,
    )
