"""Real TFMA output for tests: TFMA evaluates given predictions under the eval config, and
the Evaluator's executor judges it (`tpu_pipeline.components.evaluator.judge_evaluation`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import tensorflow_model_analysis as tfma

from tpu_pipeline.common.config import DatasetConfig, EvaluatorConfig, SourceConfig
from tpu_pipeline.components.evaluation.eval_config import build_eval_config
from tpu_pipeline.components.evaluator import judge_evaluation

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
    baseline_probabilities: np.ndarray | None = None,
) -> str:
    """Writes TFMA's metrics and plots of `probabilities` to `output` and the Evaluator's
    verdict beside them; returns `output`.

    `features`: more columns of the examples, one value (a one-item list for a feature
    the SQL slice unnests) per example, e.g. the photos' stored formats and sizes.
    `baseline_probabilities`: the last blessed model's answers to the same examples, as
    TFX adds a baseline (None: a first run).
    """
    eval_config = build_eval_config(dataset)
    model_spec = eval_config.model_specs[0]
    model_spec.ClearField("signature_name")  # predictions given, not a model's signature
    model_spec.prediction_key = "probabilities"
    columns = {"label": labels, "probabilities": list(probabilities), **(features or {})}
    if baseline_probabilities is not None:
        model_spec.name = tfma.CANDIDATE_KEY
        baseline = eval_config.model_specs.add()
        baseline.CopyFrom(model_spec)
        baseline.name, baseline.is_baseline = tfma.BASELINE_KEY, True
        baseline.prediction_key = "baseline_probabilities"
        columns["baseline_probabilities"] = list(baseline_probabilities)
    tfma.analyze_raw_data(pd.DataFrame(columns), eval_config, output_path=output)
    judge_evaluation(output, evaluator or EvaluatorConfig(), dataset.class_names)
    return output
