"""The Trainer's `run_fn`: setup -> the task (datasets, model, training) -> export; nothing after.

Each step is one call into a module of its own (`training/setup.py`: the device and the
Transform graph; `training/task.py`: the training; `models` and `serving/export.py`: the
SavedModel with its signatures), so a test can call any of them alone. What is made
from the exported model is the work of the steps after the Trainer, each cached, timed
and switched apart: the ServingPackager (`components/packager.py`: TF Serving's warmup
requests, temperature scaling, the drift reference, the TFLite variants), the Evaluator
(`components/evaluator.py`: each eval example's outcome, beside TFMA's figures) and the
Explainer (`components/explainer.py`: attributions). `training.task.fit` is the
training itself, shared with the Tuner (`tpu_pipeline.components.tuner`), whose trials train exactly
as the Trainer will.
"""

from __future__ import annotations

from tpu_pipeline.common.tfx_api import FnArgs
from tpu_pipeline.components.contract import GRAD_CAM_LAYER_KEY, read_dataset, read_trainer
from tpu_pipeline.components.device.multi_worker import wait_for_all_workers
from tpu_pipeline.components.models import serving_model
from tpu_pipeline.components.preflight import require_preflight
from tpu_pipeline.components.serving.export import export_serving_model
from tpu_pipeline.components.training.autograph import skip_autograph_for_graph_safe_code
from tpu_pipeline.components.training.hyperparameters import apply_hyperparameters, tuned_values
from tpu_pipeline.components.training.separate_process import (
    TrainingRequest,
    train_in_child,
    trains_in_child,
)
from tpu_pipeline.components.training.setup import backup_dir_for, training_setup
from tpu_pipeline.components.training.task import fit


def run_fn(fn_args: FnArgs, process: str = "same") -> None:
    """Trains the configured model on the best device available and exports it for serving.

    With a Tuner upstream, `fn_args.hyperparameters` holds the best trial's values,
    which replace their TrainerConfig fields. The training runs in this process or in
    a child (`trainer.training_process`), which calls this function again with
    `process="child"` and trains and exports there.
    """
    tuned = tuned_values(fn_args.hyperparameters["values"]) if fn_args.hyperparameters else {}
    config = apply_hyperparameters(read_trainer(fn_args.custom_config), tuned)
    dataset = read_dataset(fn_args.custom_config)
    if process == "same" and trains_in_child(config, dataset):
        train_in_child(TrainingRequest.from_fn_args(fn_args))
        return
    skip_autograph_for_graph_safe_code()
    # Keyed by what the training reads, so a retried Trainer resumes from its last epoch.
    backup_dir = backup_dir_for(
        fn_args.model_run_dir,
        {
            "train_files": fn_args.train_files,
            "transform": fn_args.transform_graph_path,
            "custom_config": fn_args.custom_config,
            "hyperparameters": tuned,
            "train_steps": fn_args.train_steps,
        },
    )
    setup = training_setup(fn_args, dataset, config)  # the device, the Transform graph
    if setup.choice.device == "tpu" and config.tpu_preflight:
        # A step that cannot compile fails here in seconds, naming the layer, not on the TPU.
        require_preflight(dataset, config, setup.choice.num_replicas, setup.transform_output)
    model, _, training_info = fit(  # datasets -> model -> train
        setup,
        config,
        train_steps=fn_args.train_steps,
        log_dir=fn_args.model_run_dir,
        backup_dir=backup_dir,
        base_model=fn_args.base_model,
    )
    training_info["training_process"] = process
    if tuned:
        training_info["hyperparameters"] = tuned
    # On every worker: reading sync-on-read weights (BatchNorm statistics) is a collective.
    served = serving_model(
        model, config.model, dataset, training_info["precision"], setup.choice.num_workers
    )
    if setup.choice.is_chief:
        export_serving_model(
            served,
            setup.transform_output,
            dataset,
            fn_args.serving_model_dir,
            training_info,
            grad_cam_layer=fn_args.custom_config.get(GRAD_CAM_LAYER_KEY),
            test_time_flip=config.test_time_flip,
        )
    if setup.choice.num_workers > 1:
        # TFX checks on every worker that the model exists: the others wait for the chief's.
        wait_for_all_workers(setup.choice.strategy)
