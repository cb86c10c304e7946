"""Everything one trained model is served as, made from the Trainer's export in a folder of its own.

The ServingPackager (`components/packager.py`) calls `package_model` after the Trainer:
the SavedModel first, refitted to a temperature when `serving.temperature_scaling` asks
and it helps (else copied as the Trainer exported it), with TF Serving's warmup requests
(`warmup.py`: real eval examples for every signature), then the drift reference
`predict` compares its input with (`components/drift/reference.py`), then each variant
measured against it (TFLite today). The Evaluator judges this folder
and the Pusher's one copy publishes it, so what is served is what was evaluated and
measured. A new serving format is one more step here and a module beside this one.
"""

from __future__ import annotations

import tensorflow_transform as tft
from absl import logging

from tpu_pipeline.common.config import DatasetConfig, ServingConfig
from tpu_pipeline.common.tfx_api import io_utils
from tpu_pipeline.components.drift.reference import write_drift_reference
from tpu_pipeline.components.models import build_model, restore_exported_weights
from tpu_pipeline.components.serving.answers import PixelClassifier, eval_answers
from tpu_pipeline.components.serving.export import (
    GRAD_CAM_LAYER_KEY,
    export_serving_model,
    read_training_info,
    write_training_info,
)
from tpu_pipeline.components.serving.temperature import (
    TEMPERATURE_INFO_KEY,
    fit_temperature,
    with_temperature,
)
from tpu_pipeline.components.serving.tflite_variants import export_tflite_variants
from tpu_pipeline.components.serving.warmup import write_warmup_requests


def package_model(
    trained_dir: str,
    package_dir: str,
    transform_output: tft.TFTransformOutput,
    dataset: DatasetConfig,
    serving: ServingConfig,
    *,
    train_files: list[str],
    eval_files: list[str],
) -> PixelClassifier:
    """Writes the served model into `package_dir`: the Trainer's SavedModel (temperature-scaled
    when that helps) with its warmup requests, its drift reference and its measured
    variants; returns it, loaded.

    Args:
      trained_dir: the Trainer's SavedModel, with its signatures.
      package_dir: where the served model goes (the ServingPackager's Model artifact).
      transform_output: the Transform graph the signatures apply (for a re-export).
      dataset: shapes, feature names and classes.
      serving: which variants, the accuracy each must keep, temperature scaling.
      train_files: the training split (calibration images for int8, drift reference).
      eval_files: the eval split every fit and measurement is made on.
    """
    trained = PixelClassifier(trained_dir)  # loaded once: answers the fit, the reference, TFLite
    served = trained
    training_info = read_training_info(trained_dir)
    if serving.temperature_scaling:
        answers = eval_answers(trained, eval_files, dataset, serving.measured_examples)
        fit = fit_temperature(*answers)
        training_info = {**training_info, TEMPERATURE_INFO_KEY: fit.as_json()}
        logging.info("Temperature scaling: %s", fit.as_json())
        if fit.applied:  # the same weights again, its signatures answering the scaled softmax
            model = build_model(
                training_info["model"], dataset.image_shape, dataset.num_classes, "float32"
            )
            if not restore_exported_weights(model, trained_dir):
                raise ValueError(f"{trained_dir} is not the {training_info['model']} it names")
            export_serving_model(
                with_temperature(model, fit.temperature),
                transform_output,
                dataset,
                package_dir,
                training_info,
                training_info.get(GRAD_CAM_LAYER_KEY),
                training_info.get("test_time_flip", False),
            )
            served = PixelClassifier(package_dir)
    if served is trained:
        io_utils.copy_dir(trained_dir, package_dir)
        write_training_info(package_dir, training_info)
    # TF Serving replays them when it loads the model; the Pusher's check sends them.
    write_warmup_requests(package_dir, eval_files, dataset)
    reference = write_drift_reference(
        package_dir,
        train_files,
        eval_files,
        dataset,
        serving.measured_examples,
        served.serve_examples,
    )
    logging.info("Drift reference: the signals of %s", reference.describe())
    variants = export_tflite_variants(
        package_dir, served, train_files, eval_files, dataset, serving
    )
    for measured in variants:
        logging.info("Serving variant %s", measured)
    return served
