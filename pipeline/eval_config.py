"""The TFMA evaluation that decides whether a model is blessed."""

from __future__ import annotations

import tensorflow_model_analysis as tfma

from pipeline.config import DatasetConfig, EvaluatorConfig

ACCURACY_METRIC = "sparse_categorical_accuracy"


def build_eval_config(dataset: DatasetConfig, evaluator: EvaluatorConfig) -> tfma.EvalConfig:
    """Accuracy must clear an absolute bound and must not drop against the baseline.

    The baseline is the last blessed model; on the very first run there is none
    and TFX checks the absolute bound alone.
    """
    accuracy_threshold = tfma.MetricThreshold(
        value_threshold=tfma.GenericValueThreshold(
            lower_bound={"value": evaluator.accuracy_lower_bound}
        ),
        # A tiny epsilon: a model exactly as good as its baseline passes.
        change_threshold=tfma.GenericChangeThreshold(
            direction=tfma.MetricDirection.HIGHER_IS_BETTER,
            absolute={"value": -evaluator.max_accuracy_drop - 1e-10},
        ),
    )
    return tfma.EvalConfig(
        model_specs=[
            tfma.ModelSpec(signature_name="serving_default", label_key=dataset.label_feature)
        ],
        slicing_specs=[tfma.SlicingSpec()],
        metrics_specs=[
            tfma.MetricsSpec(
                metrics=[
                    tfma.MetricConfig(class_name="ExampleCount"),
                    tfma.MetricConfig(
                        class_name="SparseCategoricalAccuracy", threshold=accuracy_threshold
                    ),
                ]
            )
        ],
    )
