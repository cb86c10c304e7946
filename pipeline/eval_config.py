"""The TFMA evaluation that decides whether a model is blessed, plus per-class metrics."""

from __future__ import annotations

import tensorflow_model_analysis as tfma

from common.config import DatasetConfig, EvaluatorConfig

ACCURACY_METRIC = "sparse_categorical_accuracy"
CONFUSION_MATRIX_PLOT = "MultiClassConfusionMatrixPlot"
CALIBRATION_PLOT = "CalibrationPlot"
# Buckets of the top probability in the reliability diagram and its calibration error.
CALIBRATION_BUCKETS = 10


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
            calibration_metrics_spec(),
        ],
    )


def calibration_metrics_spec() -> tfma.MetricsSpec:
    """TFMA's calibration plot of the top probability: how often the model is right when
    it says p, in CALIBRATION_BUCKETS buckets of p.

    `k: 1` binarizes each example into (is the top class the label, the top
    probability), top-label calibration. The plot's range is set: left to its default,
    TFMA takes it from the schema's label domain (0..num_classes-1), not 0..1.
    """
    plot = f'{{"num_buckets": {CALIBRATION_BUCKETS}, "left": 0.0, "right": 1.0}}'
    return tfma.MetricsSpec(
        metrics=[tfma.MetricConfig(class_name=CALIBRATION_PLOT, config=plot)],
        binarize=tfma.BinarizationOptions(k_list={"values": [1]}),
    )


def per_class_metrics_spec(num_classes: int) -> tfma.MetricsSpec:
    """Precision and recall of each class, for the report; no thresholds.

    `top_k: 1` makes the predicted class the one with the highest probability, as
    for accuracy and the confusion matrix: TFMA sets every other class's score to
    -inf. `thresholds: [0.0]` then counts the class as predicted when its score is
    above 0. Left to its default for top_k (threshold -inf), TFMA 0.47 takes a
    histogram shortcut that counts every example as predicted for a class that is
    never the top one: recall 1.0 and precision equal to the class's share, for a
    class the model never predicts. A class never predicted has recall 0 here and
    precision NaN (0 of 0).
    """
    top_1 = '{"top_k": 1, "thresholds": [0.0]}'
    return tfma.MetricsSpec(
        metrics=[
            tfma.MetricConfig(class_name="Precision", config=top_1),
            tfma.MetricConfig(class_name="Recall", config=top_1),
        ],
        binarize=tfma.BinarizationOptions(class_ids={"values": list(range(num_classes))}),
    )
