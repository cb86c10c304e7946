"""The TFMA evaluation that decides whether a model is blessed, plus per-class metrics."""

from __future__ import annotations

import tensorflow_model_analysis as tfma

from common.config import DatasetConfig, EvaluatorConfig

ACCURACY_METRIC = "sparse_categorical_accuracy"
CONFUSION_MATRIX_PLOT = "MultiClassConfusionMatrixPlot"


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
                    tfma.MetricConfig(class_name=CONFUSION_MATRIX_PLOT),
                ]
            ),
            per_class_metrics_spec(dataset.num_classes),
        ],
    )


def per_class_metrics_spec(num_classes: int) -> tfma.MetricsSpec:
    """Precision and recall of each class, for the report; no thresholds.

    `top_k: 1` makes the predicted class the one with the highest probability,
    as for accuracy, instead of any class whose probability passes 0.5.
    """
    top_1 = '{"top_k": 1}'
    return tfma.MetricsSpec(
        metrics=[
            tfma.MetricConfig(class_name="Precision", config=top_1),
            tfma.MetricConfig(class_name="Recall", config=top_1),
        ],
        binarize=tfma.BinarizationOptions(class_ids={"values": list(range(num_classes))}),
    )
