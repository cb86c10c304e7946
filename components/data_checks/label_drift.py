"""Label-mix drift: this span's label distribution against the previous span's.

A curated schema catches values out of range, not a shifted mix of valid labels
(a feed that suddenly sends twice as many 1s). TFDV's drift comparator does: the
L-infinity distance between the two spans' label distributions must stay under
`dataset.label_drift_threshold`. The previous span's statistics come from ML
Metadata through `PreviousSpanStatistics`; the first span has none, so it is not
checked. StatisticsGen must get the schema, so int labels are counted per value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

import tensorflow_data_validation as tfdv
from absl import logging
from tensorflow_metadata.proto.v0 import anomalies_pb2, statistics_pb2

from tpu_pipeline.common.tfx_api import Artifact, ResolverStrategy, artifact_utils

_L_INFINITY_HIGH = anomalies_pb2.AnomalyInfo.COMPARATOR_L_INFTY_HIGH
# ExampleGen records the span of its examples as this custom property.
SPAN_PROPERTY = "span"


def _span(artifact) -> int:
    return artifact.custom_properties[SPAN_PROPERTY].int_value


class PreviousSpanStatistics(ResolverStrategy):
    """Resolves the statistics of the newest span older than the one this run reads.

    Inputs: `examples` (every Examples artifact; the newest is this run's, as the
    resolver runs after StatisticsGen) and `statistics` (every ExampleStatistics).
    StatisticsGen leaves the span of its output unset, so each statistics
    artifact's span is that of the examples its execution read, found through
    ML Metadata's events. A rerun of the same span still compares with the span
    before it, so data rejected once stays rejected.
    """

    def resolve_artifacts(self, store, input_dict):  # noqa: D102 (TFX API)
        examples = sorted(input_dict["examples"], key=lambda artifact: artifact.id)
        statistics = input_dict["statistics"]
        if not examples or not statistics:
            return {"examples": examples[-1:], "statistics": []}
        current_span = _span(examples[-1].mlmd_artifact)
        span_of = _statistics_spans(store, [artifact.id for artifact in statistics])
        older = [a for a in statistics if span_of.get(a.id, current_span) < current_span]
        newest = max(older, key=lambda a: (span_of[a.id], a.id), default=None)
        return {"examples": examples[-1:], "statistics": [newest] if newest else []}


def _statistics_spans(store, statistics_ids: list[int]) -> dict[int, int]:
    """The span of the examples each statistics artifact was computed from."""
    producers = {
        event.artifact_id: event.execution_id
        for event in store.get_events_by_artifact_ids(statistics_ids)
        if event.type == event.OUTPUT
    }
    inputs = [
        event
        for event in store.get_events_by_execution_ids(list(set(producers.values())))
        if event.type == event.INPUT
    ]
    examples = {
        artifact.id: artifact
        for artifact in store.get_artifacts_by_id([event.artifact_id for event in inputs])
        if SPAN_PROPERTY in artifact.custom_properties
    }
    span_of_execution = {
        event.execution_id: _span(examples[event.artifact_id])
        for event in inputs
        if event.artifact_id in examples
    }
    return {
        statistics_id: span_of_execution[execution_id]
        for statistics_id, execution_id in producers.items()
        if execution_id in span_of_execution
    }


_MOST_MOVED_VALUE = re.compile(r"(maximum difference is: )(\d+)")


def name_the_class(description: str, class_names: Sequence[str]) -> str:
    """TFDV's drift description with the most-moved label value followed by its class name."""

    def named(found: re.Match) -> str:
        value = int(found.group(2))
        if value >= len(class_names):
            return found.group(0)
        return f"{found.group(0)} ({class_names[value]!r})"

    return _MOST_MOVED_VALUE.sub(named, description)


def label_drift(
    statistics: Artifact,
    previous_statistics: Artifact,
    schema_file: str,
    label_feature: str,
    threshold: float,
    class_names: Sequence[str] = (),
) -> list[str]:
    """One line per split whose label distribution moved more than `threshold` (L-infinity).

    `class_names` (label order; empty when the labels have no names) name the class
    whose share moved most.
    """
    schema = tfdv.load_schema_text(schema_file)
    tfdv.get_feature(schema, label_feature).drift_comparator.infinity_norm.threshold = threshold
    previous_splits = set(artifact_utils.decode_split_names(previous_statistics.split_names))
    problems = []
    for split in artifact_utils.decode_split_names(statistics.split_names):
        if split not in previous_splits:
            continue
        current = _load(statistics, split)
        previous = _load(previous_statistics, split)
        if not all(_counted_per_value(s, label_feature) for s in (current, previous)):
            logging.warning(
                "Label drift not checked for %s: the statistics do not count %s per value",
                split,
                label_feature,
            )
            continue
        found = tfdv.validate_statistics(current, schema, previous_statistics=previous)
        for feature, info in sorted(found.anomaly_info.items()):
            if any(reason.type == _L_INFINITY_HIGH for reason in info.reason):
                problems.append(
                    f"{split}: {feature}: label mix drifted from the previous span "
                    f"({name_the_class(info.description, class_names)})"
                )
    return problems


def _load(statistics: Artifact, split: str) -> statistics_pb2.DatasetFeatureStatisticsList:
    split_uri = artifact_utils.get_split_uri([statistics], split)
    return tfdv.load_stats_binary(os.path.join(split_uri, "FeatureStats.pb"))


def _counted_per_value(
    statistics: statistics_pb2.DatasetFeatureStatisticsList, feature_name: str
) -> bool:
    """Whether the label has per-value counts (StatisticsGen was given the schema)."""
    for feature in statistics.datasets[0].features:
        if feature.path.step[:1] == [feature_name] or feature.name == feature_name:
            return bool(feature.string_stats.rank_histogram.buckets)
    return False
