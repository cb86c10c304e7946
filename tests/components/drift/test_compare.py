"""Calling a shift with TFDV's comparators: quiet on a sample of the same data, loud on another."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow_data_validation as tfdv

from tpu_pipeline.common.config import DriftConfig
from tpu_pipeline.components.drift.compare import JS_DIVERGENCE, L_INFINITY, compare
from tpu_pipeline.components.drift.examples import record_batch
from tpu_pipeline.components.drift.signals import with_unsure

CLASSES = np.array([str(digit) for digit in range(10)], dtype=object)


_written = iter(range(1_000_000))


def _statistics(signals: dict[str, np.ndarray], folder):
    """TFDV statistics of `signals`, as the predict job computes and writes them."""
    import apache_beam as beam

    path = str(folder / f"stats-{next(_written)}.pb")
    with beam.Pipeline() as pipeline:
        _ = (
            pipeline
            | beam.Create([record_batch(signals)])
            | tfdv.GenerateStatistics()
            | tfdv.WriteStatisticsToBinaryFile(path)
        )
    return tfdv.load_stats_binary(path)


def _sample(rng, count: int, brightness: float = 5.0, unsure: float = 0.02):
    signals = {
        "brightness": rng.normal(brightness, 1.0, count),
        "confidence": np.where(rng.random(count) < unsure, 0.4, 0.99),
        "predicted_class": rng.choice(CLASSES, count),
    }
    return with_unsure(signals, 0.5)


def test_a_fresh_sample_of_the_same_data_is_steady_and_every_signal_is_measured(tmp_path):
    rng = np.random.default_rng(3)
    check = compare(
        _statistics(_sample(rng, 200), tmp_path),
        _statistics(_sample(rng, 400), tmp_path),
        DriftConfig(),
    )
    assert check.records == 200
    measured = {m.signal: m.measure for m in check.measurements}
    # The confidence itself is not compared: the share of unsure answers is.
    assert measured == {
        "brightness": JS_DIVERGENCE,
        "predicted_class": L_INFINITY,
        "unsure": L_INFINITY,
    }
    assert check.shifts == []
    assert check.headline().startswith("data shift: none in 3 signals of 200 records")


def test_brighter_images_and_unsure_answers_are_named_with_how_far_they_moved(tmp_path):
    rng = np.random.default_rng(4)
    moved = _sample(rng, 200, brightness=9.0, unsure=0.5)
    check = compare(
        _statistics(moved, tmp_path),
        _statistics(_sample(rng, 400), tmp_path),
        DriftConfig(),
        "400 training and 400 eval images",
    )
    shifted = {m.signal: m for m in check.shifts}
    assert set(shifted) == {"brightness", "unsure"}
    assert shifted["brightness"].value > 0.5 and shifted["brightness"].threshold == 0.2
    assert float(shifted["brightness"].reference.removeprefix("mean ")) == pytest.approx(5, abs=0.2)
    assert float(shifted["brightness"].current.removeprefix("mean ")) == pytest.approx(9, abs=0.2)
    # The share of unsure answers, before and after: about 2% and 50%.
    assert shifted["unsure"].reference.startswith("'yes' ")
    assert 0.4 < float(shifted["unsure"].current.rstrip("%")) / 100 < 0.6
    line = check.headline()
    assert line.startswith(
        "data shift: 2 of 3 signals moved from the model's reference (400 training and"
    )
    assert "brightness" in line and "unsure" in line and "\n" not in line
    assert check.to_json()["shifted"] is True


def test_thresholds_come_from_the_drift_section(tmp_path):
    rng = np.random.default_rng(5)
    moved = _sample(rng, 200, brightness=9.0)
    lenient = DriftConfig(max_js_divergence=1.0)
    check = compare(_statistics(moved, tmp_path), _statistics(_sample(rng, 400), tmp_path), lenient)
    assert "brightness" not in {m.signal for m in check.shifts}
    assert {m.threshold for m in check.measurements if m.measure == JS_DIVERGENCE} == {1.0}


def test_too_few_records_are_not_compared_and_the_line_says_why(tmp_path):
    rng = np.random.default_rng(6)
    check = compare(
        _statistics(_sample(rng, 12), tmp_path),
        _statistics(_sample(rng, 400), tmp_path),
        DriftConfig(),
    )
    assert check.measurements == () and check.shifts == []
    assert check.headline() == ("data shift: not checked: 12 records, under drift.min_records (30)")
    assert check.to_json()["checked"] is False
