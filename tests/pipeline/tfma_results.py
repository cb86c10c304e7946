"""Real TFMA output for tests: TFMA evaluates given predictions under the eval config."""

from __future__ import annotations

import numpy as np
import pandas as pd
import tensorflow_model_analysis as tfma

from common.config import DatasetConfig, EvaluatorConfig, SourceConfig
from components.evaluation.eval_config import build_eval_config

NAMES = ("circle", "square", "star", "heart")
DATASET = DatasetConfig(
    name="shapes",
    image_shape=(2, 2, 1),
    pixel_feature="pixels",
    label_feature="label",
    num_classes=len(NAMES),
    source=SourceConfig(label_names=NAMES),
)
# The same classes as photos in a folder: also sliced by stored format and size.
PHOTOS = DatasetConfig.model_validate(
    {**DATASET.model_dump(), "name": "shape-photos", "format": "image_folder"}
)


def write_evaluation(
    output: str,
    labels: np.ndarray,
    probabilities: np.ndarray,
    evaluator: EvaluatorConfig | None = None,
    dataset: DatasetConfig = DATASET,
    features: dict[str, list] | None = None,
) -> str:
    """Writes TFMA's metrics, plots and validation of `probabilities` to `output`, as on a
    first run (no baseline, so no change thresholds); returns `output`.

    `features`: more columns of the examples, one value (a one-item list for a feature
    the SQL slice unnests) per example, e.g. the photos' stored formats and sizes.
    """
    eval_config = build_eval_config(dataset, evaluator or EvaluatorConfig())
    model_spec = eval_config.model_specs[0]
    model_spec.ClearField("signature_name")  # predictions given, not a model's signature
    model_spec.prediction_key = "probabilities"
    for metrics_spec in eval_config.metrics_specs:
        for metric in metrics_spec.metrics:
            for per_slice in metric.per_slice_thresholds:
                per_slice.threshold.ClearField("change_threshold")
    frame = pd.DataFrame(
        {"label": labels, "probabilities": list(probabilities), **(features or {})}
    )
    tfma.analyze_raw_data(frame, eval_config, output_path=output)
    return output
