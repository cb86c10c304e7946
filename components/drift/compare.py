"""Calls a shift between a job's signal statistics and the model's reference, with TFDV.

Both sides are TFDV statistics (`DatasetFeatureStatisticsList`) of the same
signals. The schema that judges them is built here from `drift:`: a drift
comparator on every signal, Jensen-Shannon divergence for numeric ones, L-infinity
distance for categorical ones, and `tfdv.validate_statistics` measures each against
its threshold (the confidence itself is kept for reading, and compared as the share
of unsure answers). Every measurement is kept, shifted or not, so a summary can show
how close a job came.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import tensorflow_data_validation as tfdv
from tensorflow_metadata.proto.v0 import anomalies_pb2, schema_pb2, statistics_pb2

from tpu_pipeline.common.config import DriftConfig
from tpu_pipeline.components.drift.signals import CONFIDENCE, UNSURE

JS_DIVERGENCE = "Jensen-Shannon divergence"
L_INFINITY = "L-infinity distance"
_MEASURES = {
    anomalies_pb2.DriftSkewInfo.Measurement.JENSEN_SHANNON_DIVERGENCE: JS_DIVERGENCE,
    anomalies_pb2.DriftSkewInfo.Measurement.L_INFTY: L_INFINITY,
}


@dataclasses.dataclass(frozen=True)
class Measurement:
    """How far one signal moved from the reference, and what it was at on each side."""

    signal: str
    measure: str
    value: float
    threshold: float
    reference: str  # the reference's mean, or its share of the value that moved most
    current: str

    @property
    def shifted(self) -> bool:
        return self.value > self.threshold

    def line(self) -> str:
        verdict = "shifted" if self.shifted else "steady"
        return (
            f"{self.signal} {verdict}: {self.measure} {self.value:.3f} (at most "
            f"{self.threshold:g}); {self.reference} in the reference, {self.current} here"
        )


@dataclasses.dataclass(frozen=True)
class DriftCheck:
    """A job's input against its model's reference; `note` says why nothing was compared."""

    records: int
    reference: str  # which images the reference holds
    measurements: tuple[Measurement, ...] = ()
    note: str = ""

    @property
    def shifts(self) -> list[Measurement]:
        return [m for m in self.measurements if m.shifted]

    def headline(self, subject: str = "data shift") -> str:
        """One line: what moved and by how much, that nothing did, or why it was not checked."""
        if not self.measurements:
            return f"{subject}: not checked: {self.note}"
        if not self.shifts:
            worst = max(self.measurements, key=lambda m: m.value / m.threshold)
            return (
                f"{subject}: none in {len(self.measurements)} signals of {self.records:,} "
                f"records (closest: {worst.signal}, {worst.value:.3f} of {worst.threshold:g})"
            )
        moved = "; ".join(
            f"{m.signal} {m.value:.3f} > {m.threshold:g} ({m.reference} -> {m.current})"
            for m in sorted(self.shifts, key=lambda m: -m.value / m.threshold)
        )
        return (
            f"{subject}: {len(self.shifts)} of {len(self.measurements)} signals moved from "
            f"the model's reference ({self.reference}): {moved}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "checked": bool(self.measurements),
            "shifted": bool(self.shifts),
            "records": self.records,
            "reference": self.reference,
            "note": self.note,
            "signals": [{**dataclasses.asdict(m), "shifted": m.shifted} for m in self.measurements],
        }


def _drift_schema(reference: statistics_pb2.DatasetFeatureStatisticsList, drift: DriftConfig):
    """A schema with a drift comparator on every signal of `reference`."""
    schema = tfdv.infer_schema(reference)
    for feature in schema.feature:
        if feature.name == CONFIDENCE:
            # Squeezed near 1, its divergence swings with 0.993 against 0.999, which is no
            # shift; `unsure`, the share of answers under drift.low_confidence, is compared.
            continue
        if feature.type == schema_pb2.BYTES:
            threshold = drift.max_unsure_share_change if feature.name == UNSURE else None
            comparator = feature.drift_comparator.infinity_norm
            comparator.threshold = threshold or drift.max_class_mix_change
        else:
            feature.drift_comparator.jensen_shannon_divergence.threshold = drift.max_js_divergence
    return schema


def _features(stats: statistics_pb2.DatasetFeatureStatisticsList) -> dict[str, Any]:
    return {feature.path.step[0]: feature for feature in stats.datasets[0].features}


def _shares(feature) -> dict[str, float]:
    """A categorical feature's share of each value."""
    buckets = feature.string_stats.rank_histogram.buckets
    total = sum(bucket.sample_count for bucket in buckets) or 1
    return {bucket.label: bucket.sample_count / total for bucket in buckets}


def _sides(reference, current) -> tuple[str, str]:
    """What a reader compares: the means of a numeric signal, the shares of the value of a
    categorical one whose share moved most."""
    if reference.HasField("num_stats"):
        return f"mean {reference.num_stats.mean:.4g}", f"mean {current.num_stats.mean:.4g}"
    before, after = _shares(reference), _shares(current)
    values = set(before) | set(after)
    moved = "yes" if values == {"yes", "no"} else None  # `unsure`: the share of unsure ones
    moved = moved or max(values, key=lambda v: abs(after.get(v, 0) - before.get(v, 0)))
    return f"{moved!r} {before.get(moved, 0):.0%}", f"{after.get(moved, 0):.0%}"


def compare(
    current: statistics_pb2.DatasetFeatureStatisticsList,
    reference: statistics_pb2.DatasetFeatureStatisticsList,
    drift: DriftConfig,
    described: str = "",
) -> DriftCheck:
    """Every signal of `current` measured against `reference` with `drift`'s thresholds;
    `described` says which images the reference holds."""
    records = current.datasets[0].num_examples
    if records < drift.min_records:
        note = f"{records:,} records, under drift.min_records ({drift.min_records})"
        return DriftCheck(records, described, note=note)
    anomalies = tfdv.validate_statistics(
        current, _drift_schema(reference, drift), previous_statistics=reference
    )
    before, after = _features(reference), _features(current)
    measurements = []
    for info in anomalies.drift_skew_info:
        signal = info.path.step[0]
        for measured in info.drift_measurements:
            if measured.type not in _MEASURES or signal not in after:
                continue
            sides = _sides(before[signal], after[signal])
            measurements.append(
                Measurement(
                    signal, _MEASURES[measured.type], measured.value, measured.threshold, *sides
                )
            )
    return DriftCheck(records, described, tuple(measurements))
