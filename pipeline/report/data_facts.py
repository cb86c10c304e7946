"""What the data looked like: example counts, feature statistics and anomalies per split.

Read from StatisticsGen's TFDV statistics and ExampleValidator's anomalies, the
same artifacts the DataGate judged, so the report shows why data was accepted
or rejected.
"""

from __future__ import annotations

import dataclasses
import math
import os

import numpy as np
import tensorflow_data_validation as tfdv
from ml_metadata.proto import metadata_store_pb2
from tensorflow_metadata.proto.v0 import statistics_pb2

from tpu_pipeline.common.tfx_api import artifact_utils, standard_artifacts
from tpu_pipeline.components.contract import IMAGE_FORMAT_FEATURE
from tpu_pipeline.components.data_checks.anomalies import describe_anomalies

STATISTICS_FILE = "FeatureStats.pb"


@dataclasses.dataclass
class FeatureSummary:
    """One feature of one split, as TFDV summarised it (values pooled over examples)."""

    name: str
    type: str
    present: int  # examples that have the feature
    values_per_example: float
    minimum: float
    mean: float
    std_dev: float
    maximum: float
    zeros_percent: float
    histogram: list[tuple[float, float, float]]  # (low, high, count) of the standard histogram
    # Text features (an image's format): examples per value, most frequent first.
    values: list[tuple[str, int]] = dataclasses.field(default_factory=list)
    # Binary features (encoded photos, raw 8-bit pixels): their mean size. TFDV counts no
    # values of them, only that each is binary, so `values` stays empty.
    average_bytes: float | None = None


@dataclasses.dataclass
class SplitStatistics:
    name: str
    examples: int
    features: list[FeatureSummary]


# Above this ratio of the largest class to the smallest, the report calls the classes unbalanced.
UNBALANCED_RATIO = 1.5


@dataclasses.dataclass
class DataFacts:
    splits: list[SplitStatistics]
    # One line per anomaly; empty when the data matched the schema, None when
    # ExampleValidator never ran (the data was not checked).
    anomalies: list[str] | None
    # The training split's largest class over its smallest (None: no label statistics).
    class_imbalance: float | None = None
    # ExampleGen's line about images odd among the rest (None: none, or not an image source).
    odd_images: str | None = None
    label_feature: str | None = None
    schema_file: str | None = None  # the file ImportSchemaGen read, when recorded

    @property
    def unbalanced(self) -> bool:
        return self.class_imbalance is not None and self.class_imbalance > UNBALANCED_RATIO

    @property
    def describes_photos(self) -> bool:
        """ExampleGen stored encoded photos, with their sizes and formats beside them."""
        return any(f.name == IMAGE_FORMAT_FEATURE for split in self.splits for f in split.features)


def class_imbalance(splits: list[SplitStatistics], label_feature: str) -> float | None:
    """The training split's largest class count over its smallest present one."""
    train = next((split for split in splits if split.name == "train"), None)
    label = train and next((f for f in train.features if f.name == label_feature), None)
    counts = [count for _, _, count in label.histogram if count] if label else []
    return max(counts) / min(counts) if counts else None


def _feature_summary(feature: statistics_pb2.FeatureNameStatistics) -> FeatureSummary:
    name = ".".join(feature.path.step) or feature.name
    type_name = statistics_pb2.FeatureNameStatistics.Type.Name(feature.type)
    if not feature.HasField("num_stats") and feature.string_stats.rank_histogram.buckets:
        labels = [bucket.label for bucket in feature.string_stats.rank_histogram.buckets]
        if all(label.lstrip("-").isdigit() for label in labels):
            return _categorical_summary(name, type_name, feature.string_stats)
        return _text_summary(name, type_name, feature.string_stats)
    numbers = feature.num_stats
    common = numbers.common_stats
    histogram = next(
        (h for h in numbers.histograms if h.type == statistics_pb2.Histogram.STANDARD), None
    )
    return FeatureSummary(
        name=name,
        type=type_name,
        present=int(common.num_non_missing),
        values_per_example=common.avg_num_values,
        minimum=numbers.min,
        mean=numbers.mean,
        std_dev=numbers.std_dev,
        maximum=numbers.max,
        zeros_percent=100 * numbers.num_zeros / max(common.tot_num_values, 1),
        histogram=[(b.low_value, b.high_value, b.sample_count) for b in histogram.buckets]
        if histogram
        else [],
    )


def _categorical_summary(
    name: str, type_name: str, strings: statistics_pb2.StringStatistics
) -> FeatureSummary:
    """An int feature the schema marks categorical (the label): TFDV counts it per value."""
    counts = {int(b.label): b.sample_count for b in strings.rank_histogram.buckets}
    values = np.array(sorted(counts), dtype=float)
    weights = np.array([counts[int(v)] for v in values])
    mean = float(np.average(values, weights=weights))
    common = strings.common_stats
    return FeatureSummary(
        name=name,
        type=type_name,
        present=int(common.num_non_missing),
        values_per_example=common.avg_num_values,
        minimum=float(values.min()),
        mean=mean,
        std_dev=float(np.sqrt(np.average((values - mean) ** 2, weights=weights))),
        maximum=float(values.max()),
        zeros_percent=100 * counts.get(0, 0) / max(common.tot_num_values, 1),
        histogram=[(v - 0.5, v + 0.5, float(counts[int(v)])) for v in values],
    )


def _text_summary(
    name: str, type_name: str, strings: statistics_pb2.StringStatistics
) -> FeatureSummary:
    """A text or binary feature: no numbers; a text feature's values counted.

    TFDV names every value that is not UTF-8 `__BYTES_VALUE__`: a binary feature (an
    encoded photo, raw pixels) keeps its mean size instead, and no values. A photo's
    height, width and format are the numeric and text features ExampleGen writes beside it.
    """
    common = strings.common_stats
    binary = strings.invalid_utf8_count > 0
    return FeatureSummary(
        name=name,
        type=type_name,
        present=int(common.num_non_missing),
        values_per_example=common.avg_num_values,
        minimum=math.nan,
        mean=math.nan,
        std_dev=math.nan,
        maximum=math.nan,
        zeros_percent=0.0,
        histogram=[],
        values=[]
        if binary
        else [(b.label, int(b.sample_count)) for b in strings.rank_histogram.buckets],
        average_bytes=strings.avg_length if binary else None,
    )


def read_statistics(statistics: metadata_store_pb2.Artifact) -> list[SplitStatistics]:
    """Example counts and numeric feature summaries of every split StatisticsGen saw."""
    artifact = standard_artifacts.ExampleStatistics()
    artifact.set_mlmd_artifact(statistics)
    splits = []
    for split in artifact_utils.decode_split_names(artifact.split_names):
        path = os.path.join(artifact_utils.get_split_uri([artifact], split), STATISTICS_FILE)
        dataset = tfdv.load_stats_binary(path).datasets[0]
        features = [_feature_summary(f) for f in dataset.features]
        splits.append(SplitStatistics(split, int(dataset.num_examples), features))
    return splits


def read_anomalies(anomalies: metadata_store_pb2.Artifact) -> list[str]:
    """ExampleValidator's anomalies, worded as the DataGate words them."""
    artifact = standard_artifacts.ExampleAnomalies()
    artifact.set_mlmd_artifact(anomalies)
    return describe_anomalies(artifact)
