"""The Explainer's part: the attribution maps of the eval answers it chose."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tpu_pipeline.components.explain.store import METHOD_NAMES, read_index
from tpu_pipeline.pipeline.results.summary_part import (
    read_step,
    summary_key,
    summary_part,
    text_lines,
)
from tpu_pipeline.pipeline.wiring.node_ids import NodeIds

if TYPE_CHECKING:
    from tpu_pipeline.pipeline.results.summary_reading import FinishedRun


@summary_part
class Explanation:
    """Why the model answered as it did, on a few eval answers (components/explain/)."""

    attributions: dict[str, Any] | None = summary_key(
        "the Explainer's attribution maps: method, settings, and each explained eval answer "
        "(index, label, predicted, probability, mistake)",
        null="no Explainer ran (`explain.mistakes` and `explain.correct_per_class` both 0), "
        "or the Trainer was skipped",
        example={
            "method": "xrai",
            "settings": {"examined_examples": 1000, "mistakes": 8, "seconds": 157.0},
            "chosen": [
                {
                    "index": 241,
                    "label": 5,
                    "predicted": 9,
                    "probability": 0.868,
                    "mistake": True,
                    "source": None,
                }
            ],
        },
        default=None,
    )

    @read_step(30)
    def read_explanation(self, run: FinishedRun) -> None:
        explanation = run.record.node(NodeIds.EXPLAINER).outputs.get("explanation")
        if run.trained and explanation:
            self.attributions = read_index(explanation[0].uri)

    def describe_attributions(self) -> str:
        """One line: how many mistakes and right answers the Explainer mapped, and how."""
        chosen = self.attributions["chosen"]
        mistakes = sum(answer["mistake"] for answer in chosen)
        method = METHOD_NAMES.get(self.attributions["method"], self.attributions["method"])
        settings = self.attributions["settings"]
        return (
            f"attributions: {mistakes} mistakes and {len(chosen) - mistakes} right answers "
            f"of {settings['examined_examples']:,} eval examples mapped with {method} "
            f"({settings['seconds']:.1f} s; the report's Why it decided)"
        )

    @text_lines(30)
    def explanation_lines(self) -> list[str]:
        return [self.describe_attributions()] if self.attributions else []
