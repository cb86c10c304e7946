"""The SpanShiftGate before the Pusher: the span shift report's check, as a verdict the Pusher
obeys (`drift.block_push`)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.datasets import load_digits

from tpu_pipeline.common.config import DriftConfig
from tpu_pipeline.common.tfx_api import standard_artifacts
from tpu_pipeline.components.drift.reference import REFERENCE_PATH
from tpu_pipeline.components.drift.signals import pixel_signals
from tpu_pipeline.components.drift.span_shift import model_span_shift
from tpu_pipeline.components.span_shift_gate import (
    SHIFTED_PROPERTY,
    SpanShiftGate,
    push_hold,
    read_gate_verdict,
)


def _model(root, name: str, images: np.ndarray):
    """A Model artifact whose SavedModel folder keeps the drift reference of `images`."""
    model = standard_artifacts.Model()
    model.uri = str(root / name)
    reference = root / name / "Format-Serving" / REFERENCE_PATH
    reference.parent.mkdir(parents=True)
    signals = {k: v.tolist() for k, v in pixel_signals(images[..., None]).items()}
    reference.write_text(json.dumps({"train": signals, "eval": {"confidence": [1.0] * 8}}))
    return model


def _judge(root, new: np.ndarray, served: np.ndarray | None):
    """Runs the gate's executor as TFX does; returns its verdict artifact."""
    verdict = standard_artifacts.JsonValue()
    verdict.uri = str(root / "verdict" / "value")
    (root / "verdict").mkdir()
    inputs = {"model": [_model(root, "new", new)]}
    if served is not None:
        inputs["baseline_model"] = [_model(root, "served", served)]
    SpanShiftGate.EXECUTOR_SPEC.executor_class().Do(
        inputs, {"verdict": [verdict]}, {"drift_config": DriftConfig().model_dump_json()}
    )
    return verdict


@pytest.fixture(scope="module")
def digits() -> np.ndarray:
    return load_digits().images.astype(np.float32)


def test_a_span_of_inverted_digits_is_held_back_with_the_reports_own_check(tmp_path, digits):
    verdict = _judge(tmp_path, 16 - digits[1::2], digits[::2])

    judged = read_gate_verdict(verdict.uri)
    assert judged["shifted"] and verdict.get_int_custom_property(SHIFTED_PROPERTY) == 1
    # The very check the run summary reports: same signals, thresholds and headline.
    report = model_span_shift(str(tmp_path / "new"), str(tmp_path / "served"), DriftConfig())
    assert judged == report
    assert judged["headline"].startswith("span shift: ") and "brightness" in judged["headline"]
    assert "drift.block_push" in push_hold(judged)


def test_a_fresh_sample_of_the_same_digits_lets_the_push_through(tmp_path, digits):
    verdict = _judge(tmp_path, digits[1::2], digits[::2])

    judged = read_gate_verdict(verdict.uri)
    assert judged["checked"] and not judged["shifted"]
    assert verdict.get_int_custom_property(SHIFTED_PROPERTY) == 0
    assert push_hold(judged) is None


def test_the_first_span_has_nothing_to_compare_with_and_holds_nothing(tmp_path, digits):
    verdict = _judge(tmp_path, digits[1::2], None)

    assert read_gate_verdict(verdict.uri) is None
    assert verdict.get_int_custom_property(SHIFTED_PROPERTY) == 0
    assert push_hold(None) is None
