"""What TFMA measures of a candidate model: overall, per class and per slice, and against
the last blessed model on the same examples; the verdict is `verdict.py`'s."""

from __future__ import annotations

import tensorflow_model_analysis as tfma

from tpu_pipeline.common.config import DatasetConfig, SliceKind
from tpu_pipeline.components.contract import (
    IMAGE_FORMAT_FEATURE,
    IMAGE_HEIGHT_FEATURE,
    IMAGE_WIDTH_FEATURE,
    SOURCE_FOLDER_FEATURE,
    SPAN_FEATURE,
)
from tpu_pipeline.components.evaluation import paired_metric

ACCURACY_METRIC = "sparse_categorical_accuracy"
CONFUSION_MATRIX_PLOT = "MultiClassConfusionMatrixPlot"
CALIBRATION_PLOT = "CalibrationPlot"
# Buckets of the top probability in the reliability diagram and its calibration error.
CALIBRATION_BUCKETS = 10
# The size slices: the stored image's longer side, in pixels, up to each limit.
IMAGE_SIZE_SLICE = "image_size"
SIZE_BUCKET_LIMITS = (64, 128, 256, 512)
SIZE_BUCKETS = ("up to 64 px", "65-128 px", "129-256 px", "257-512 px", "over 512 px")


def build_eval_config(dataset: DatasetConfig) -> tfma.EvalConfig:
    """What TFMA measures of the candidate, on the whole eval split and on each slice
    (`slicing_specs`): the examples, accuracy, the confusion matrix, each class's precision
    and recall, the calibration, and against a baseline the examples only one of the two
    models gets right (`paired_metric.py`).

    No thresholds: TFMA measures, and the Evaluator's executor judges what it measured by
    the `evaluator:` rules (`verdict.py`), which TFMA's thresholds cannot express (a slice
    too small to judge, a drop that chance explains). Without thresholds TFX's executor
    writes no blessing; ours writes it from the verdict. TFX adds the baseline's model spec
    when there is a last blessed model (on the very first run there is none).
    """
    kinds = slicing_specs(dataset)
    return tfma.EvalConfig(
        model_specs=[
            tfma.ModelSpec(
                signature_name="serving_default",
                label_key=dataset.label_feature,
                # What TFMA would find by loading the model with Keras just to ask (twice:
                # 10 s of a 96x96 MobileNetV2's evaluation under a profiler); ours is one.
                model_type=tfma.TF_KERAS,
            )
        ],
        slicing_specs=[tfma.SlicingSpec(), *kinds.values()],
        metrics_specs=[
            tfma.MetricsSpec(
                metrics=[
                    tfma.MetricConfig(class_name="ExampleCount"),
                    tfma.MetricConfig(class_name="SparseCategoricalAccuracy"),
                    tfma.MetricConfig(class_name=CONFUSION_MATRIX_PLOT),
                    tfma.MetricConfig(
                        class_name=paired_metric.CLASS_NAME, module=paired_metric.MODULE
                    ),
                ]
            ),
            per_class_metrics_spec(dataset.num_classes),
            calibration_metrics_spec(),
        ],
    )


def slicing_specs(dataset: DatasetConfig) -> dict[SliceKind, tfma.SlicingSpec]:
    """The slices of the eval split TFMA measures beside the whole: each class, for photos
    each stored format and each size bucket of the stored image's longer side, and each
    span and each source folder where ExampleGen records them (`provenance.py`).

    The size buckets come from a SQL slice (TFMA wraps the query in
    `SELECT ARRAY(...) AS slice_key FROM Examples AS example`), so a slice is a
    readable range rather than one slice per distinct size.
    """
    kinds: dict[SliceKind, tfma.SlicingSpec] = {
        "class": tfma.SlicingSpec(feature_keys=[dataset.label_feature])
    }
    if dataset.stores_encoded_images:
        kinds["image_format"] = tfma.SlicingSpec(feature_keys=[IMAGE_FORMAT_FEATURE])
        kinds["image_size"] = tfma.SlicingSpec(slice_keys_sql=_size_bucket_sql())
    if dataset.mixes_spans:
        kinds["span"] = tfma.SlicingSpec(feature_keys=[SPAN_FEATURE])
    if dataset.source_folder_slices:
        kinds["source_folder"] = tfma.SlicingSpec(feature_keys=[SOURCE_FOLDER_FEATURE])
    return kinds


def slice_kinds_by_key(label_feature: str) -> dict[str, SliceKind]:
    """The kind of slice each slice key TFMA writes stands for."""
    return {
        label_feature: "class",
        IMAGE_FORMAT_FEATURE: "image_format",
        IMAGE_SIZE_SLICE: "image_size",
        SPAN_FEATURE: "span",
        SOURCE_FOLDER_FEATURE: "source_folder",
    }


def _size_bucket_sql() -> str:
    longer = "GREATEST(height, width)"
    cases = " ".join(
        f"WHEN {longer} <= {high} THEN '{label}'"
        for label, high in zip(SIZE_BUCKETS, SIZE_BUCKET_LIMITS, strict=False)
    )
    return (
        f"SELECT STRUCT(CASE {cases} ELSE '{SIZE_BUCKETS[-1]}' END AS {IMAGE_SIZE_SLICE}) "
        f"FROM example.{IMAGE_HEIGHT_FEATURE} AS height, example.{IMAGE_WIDTH_FEATURE} AS width"
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
