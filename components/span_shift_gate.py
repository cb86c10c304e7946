"""Holds the push back when a new span's images moved from the served model's (`drift.block_push`).

The span shift report (`components/drift/span_shift.py`) compares the images the new model
learned from with those of the served model, the Evaluator's baseline; made after the run,
it comes after the Pusher has published. With `drift.block_push` (`run --fail-on-drift`
sets it) this gate makes the same check, the same signals against the same `drift:`
thresholds, before the Evaluator and the Pusher, and writes it as its verdict: a JsonValue
holding the check as the run summary keeps it, or null when there is no served model to
compare with. The Evaluator (`components/evaluator.py`) refuses a model from a span that
shifted, so it never becomes the baseline the next run is compared with (the served model
stays it, and the next tick on the same span is held back again); the Pusher
(`components/pusher.py`) publishes nothing and says why (`push_hold`); the summary reports
the verdict rather than comparing again. A span the check could not compare (a model
without a reference) holds nothing back, as the report calls it no shift; a comparison
that fails fails the gate, so no model is pushed unchecked. The verdict is TFX's
JsonValue, a type that fits: TFX 1.16's Vertex AI entrypoint loads it by its `tfx.`
title, where one of our own must be importable by its name (`tpu_pipeline/`).
The function below is the component's spec and its executor both.
TFX names the executor by this module's path in compiled pipelines, so it stays here, and
reads the function's annotations as types (no `from __future__ import annotations`).
"""

import json
from typing import Any

from tpu_pipeline.common import fileio
from tpu_pipeline.common.config import DriftConfig
from tpu_pipeline.common.tfx_api import InputArtifact, OutputArtifact, Parameter, component
from tpu_pipeline.common.tfx_api import standard_artifacts as artifacts

# The gate's output, which the Evaluator and the Pusher take as their `span_shift` input
# (`components/evaluator.py`, `components/pusher.py`).
VERDICT_KEY = "verdict"
SPAN_SHIFT_KEY = "span_shift"
# Set on the verdict when written, 1 for a span that shifted: shown where artifacts are
# listed (ML Metadata, the Vertex AI console), and how a job's reader knows it was written.
SHIFTED_PROPERTY = "shifted"


@component
def SpanShiftGate(  # noqa: N802 (TFX names components in CamelCase)
    model: InputArtifact[artifacts.Model],
    verdict: OutputArtifact[artifacts.JsonValue],
    drift_config: Parameter[str],
    baseline_model: InputArtifact[artifacts.Model] = None,
) -> None:
    """Writes `model`'s span against `baseline_model`'s (the served model) into `verdict`.

    `drift_config` is the `drift:` section as JSON. No baseline (the first span): null.
    """
    # TFDV, only when the gate runs: the Pusher and run summaries import this module.
    from tpu_pipeline.components.drift.span_shift import model_span_shift

    drift = DriftConfig.model_validate_json(drift_config)
    judged = model_span_shift(model.uri, baseline_model.uri, drift) if baseline_model else None
    verdict.value = judged
    verdict.set_int_custom_property(SHIFTED_PROPERTY, int(bool(judged and judged["shifted"])))


def read_gate_verdict(uri: str) -> dict[str, Any] | None:
    """The verdict the gate wrote at `uri` (a JsonValue's file, local or gs://), for readers
    of a finished run; None when it had no served model to compare with."""
    with fileio.open(uri) as handle:
        text = handle.read()
    return json.loads(text) if text.strip() else None


def push_hold(verdict: dict[str, Any] | None) -> str | None:
    """Why the Pusher publishes nothing, from the gate's verdict; None when it may push."""
    if not verdict or not verdict["shifted"]:
        return None
    return "held back by drift.block_push: the new span's images moved from the served model's"
