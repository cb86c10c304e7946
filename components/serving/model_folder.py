"""Everything one trained model is served as, written into the Trainer's model folder.

The SavedModel first (refitted to a temperature when `serving.temperature_scaling` asks
and it helps), then TF Serving's warmup requests for it and the drift
reference `predict` compares its input with (`components/drift/reference.py`),
then each variant measured against it (TFLite today).
The Trainer writes them, not a later component, so the variants are part of
the model artifact and the Pusher's one copy publishes exactly what was
measured. A new serving format is one more step here and a module beside this one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_transform as tft
from absl import logging

from common.config import DatasetConfig, ServingConfig
from components.drift.reference import write_drift_reference
from components.serving.answers import PixelClassifier, eval_answers
from components.serving.export import (
    GRAD_CAM_LAYER_KEY,
    export_serving_model,
    feature_map_layer,
    serving_copy,
    write_training_info,
)
from components.serving.temperature import TEMPERATURE_INFO_KEY, fit_temperature
from components.serving.tflite_variants import export_tflite_variants
from components.serving.warmup import write_warmup_requests


def write_model_folder(
    weights: list[np.ndarray],
    model_name: str,
    transform_output: tft.TFTransformOutput,
    dataset: DatasetConfig,
    serving: ServingConfig,
    *,
    export_dir: str,
    train_files: list[str],
    eval_files: list[str],
    training_info: dict[str, Any],
    grad_cam_layer: str | None = None,
) -> PixelClassifier:
    """Exports the SavedModel with the trained `weights`, its warmup requests, then its
    measured variants; returns the export, loaded once for every step that asks it.

    Args:
      weights: the trained model's weights (read on every worker, see `serving_copy`).
      model_name: `trainer.model`, to build the float32 serving copy.
      transform_output: the Transform graph the signatures apply.
      dataset: shapes, feature names and classes.
      serving: which variants, and the accuracy each must keep.
      export_dir: TFX's `serving_model_dir`.
      train_files: the training split (calibration images for int8).
      eval_files: the eval split every variant is measured on.
      training_info: how the model was trained, saved beside it.
      grad_cam_layer: the layer whose feature maps the model keeps for Grad-CAM
        (`explain.grad_cam_layer`; None: its last feature-map layer).
    """
    model = serving_copy(weights, model_name, dataset)
    layer = feature_map_layer(model, grad_cam_layer)
    if layer is not None:  # resolved once: both exports keep it, training_info names it
        grad_cam_layer = layer.name
        training_info = {**training_info, GRAD_CAM_LAYER_KEY: grad_cam_layer}
    export_serving_model(
        model, transform_output, dataset, export_dir, training_info, None, grad_cam_layer
    )
    if serving.temperature_scaling:
        answers = eval_answers(
            PixelClassifier(export_dir), eval_files, dataset, serving.measured_examples
        )
        fit = fit_temperature(*answers)
        training_info = {**training_info, TEMPERATURE_INFO_KEY: fit.as_json()}
        logging.info("Temperature scaling: %s", fit.as_json())
        if fit.applied:  # the same model again, its signatures answering the scaled softmax
            tf.io.gfile.rmtree(export_dir)
            export_serving_model(
                model,
                transform_output,
                dataset,
                export_dir,
                training_info,
                fit.temperature,
                grad_cam_layer,
            )
        else:
            write_training_info(export_dir, training_info)
    write_warmup_requests(export_dir, eval_files, dataset)
    exported = PixelClassifier(export_dir)
    reference = write_drift_reference(
        export_dir,
        train_files,
        eval_files,
        dataset,
        serving.measured_examples,
        exported.serve_examples,
    )
    logging.info("Drift reference: the signals of %s", reference.describe())
    variants = export_tflite_variants(
        export_dir, exported, train_files, eval_files, dataset, serving
    )
    for measured in variants:
        logging.info("Serving variant %s", measured)
    return exported
