"""The span shift's part: a run of spans compares the new span's images with the served
model's (components/drift/span_shift.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tpu_pipeline.common.config import DriftConfig
from tpu_pipeline.components.span_shift_gate import VERDICT_KEY, read_gate_verdict
from tpu_pipeline.pipeline.results.run_record import custom_property
from tpu_pipeline.pipeline.results.summary_part import (
    read_step,
    summary_key,
    summary_part,
    text_lines,
)
from tpu_pipeline.pipeline.wiring.node_ids import NodeIds

if TYPE_CHECKING:
    from tpu_pipeline.pipeline.results.summary_reading import FinishedRun

# Noted on a run of spans: the `drift:` section its span shift was judged by.
DRIFT_RULES_PROPERTY = "drift_config"


@summary_part
class SpanShift:
    """How far the new span's images moved from those the served model was trained on."""

    span_shift: dict[str, Any] | None = summary_key(
        "the new span's images against the served model's: `DriftCheck.to_json()` "
        "(components/drift/compare.py) plus its `headline`; with `drift.block_push`, the "
        "SpanShiftGate's verdict, the one the Pusher obeyed",
        null="not a run of spans, no model served yet, or no evaluation",
        example={
            "checked": True,
            "shifted": False,
            "records": 1797,
            "reference": "the served model's training images",
            "note": "",
            "signals": [
                {
                    "signal": "brightness",
                    "measure": "Jensen-Shannon divergence",
                    "value": 0.012,
                    "threshold": 0.1,
                    "reference": "0.312",
                    "current": "0.318",
                    "shifted": False,
                }
            ],
            "headline": "span shift: none in 4 signals of 1,797 records (closest: brightness, "
            "0.012 of 0.1)",
        },
        default=None,
    )

    def add_span_shift(self, new_model_uri: str, served_model_uri: str, drift: DriftConfig) -> None:
        """Compares the new model's training images with the served model's (a run of spans).

        Both are Model artifacts' URIs: the run's model and the Evaluator's baseline. A
        comparison that fails is a note in the result, never an error: a summary must not
        fail the run.
        """
        # TensorFlow and TFDV, only for a run that compares spans.
        from tpu_pipeline.components.drift.compare import DriftCheck
        from tpu_pipeline.components.drift.span_shift import kept, model_span_shift

        try:
            self.span_shift = model_span_shift(new_model_uri, served_model_uri, drift)
        except Exception as error:  # noqa: BLE001 (a report of the run must not fail it)
            note = f"could not compare ({type(error).__name__}: {error})"
            self.span_shift = kept(DriftCheck(0, "", note=note))

    @read_step(45)
    def read_span_shift(self, run: FinishedRun) -> None:
        """Judged by `run.drift`, else by the rules a run of spans noted (DRIFT_RULES_PROPERTY).

        Where the SpanShiftGate judged the span before the Pusher (`drift.block_push`), its
        verdict is the summary's: the check that decided the push, not a second one.
        """
        gate = run.record.node(NodeIds.SPAN_SHIFT_GATE)
        judged = gate.status in ("executed", "cached") and gate.outputs.get(VERDICT_KEY)
        if judged:
            self.span_shift = read_gate_verdict(judged[0].uri)
            return
        outputs = run.record.node(NodeIds.EVALUATOR).outputs
        if not (outputs.get("evaluation") and outputs.get("blessing")):
            return
        drift = run.drift
        if drift is None:
            noted = run.record.noted(NodeIds.EVALUATOR, DRIFT_RULES_PROPERTY)
            drift = DriftConfig.model_validate_json(noted) if noted else None
        served = custom_property(outputs["blessing"][0], "baseline_model")
        if drift is not None and served and run.model is not None:
            self.add_span_shift(run.model.uri, served, drift)

    @property
    def span_shifted(self) -> bool:
        return bool(self.span_shift and self.span_shift["shifted"])

    @text_lines(60)
    def span_shift_lines(self) -> list[str]:
        return [self.span_shift["headline"]] if self.span_shift else []
