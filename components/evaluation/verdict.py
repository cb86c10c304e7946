"""The one decision whether a model is blessed, from what TFMA measured.

TFMA measures (`eval_config.py`): accuracy on the whole eval split and on each slice, with
each slice's example count, and, against the last blessed model, the examples only one of
the two gets right (`paired_metric.py`). `judge` applies the `evaluator:` rules to those
figures; the Evaluator's executor (`components/evaluator.py`) writes the verdict beside
TFMA's output and the blessing from it. TFMA's own thresholds cannot say either thing this
needs: that a slice of one photo is evidence of nothing (`slice_min_examples`), and that a
retrain one image behind its baseline is behind by chance (`baseline_test.py`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any, Protocol

from tpu_pipeline.common.config import EvaluatorConfig
from tpu_pipeline.components.evaluation.baseline_test import (
    BaselineComparison,
    compare_with_baseline,
)

# Written into the evaluation's folder, beside TFMA's metrics, plots and validations.
VERDICT_FILE = "blessing_verdict.json"


class MeasuredSlice(Protocol):
    """What the verdict reads of a slice (`results.SliceMetrics`)."""

    kind: str
    value: str
    examples: int
    accuracy: float


@dataclasses.dataclass(frozen=True)
class PairedCounts:
    """Eval examples only the candidate gets right, only the baseline, and all both answered."""

    candidate_right_only: int
    baseline_right_only: int
    examples: int


# TFMA computes accuracy in float32: 4,500 right answers of 5,000 read 0.89999998. A value
# within float32's rounding of a bound meets it (one example of a million is 1e-6).
FLOAT32_ROUNDING = 1e-6


def _below(value: float, bound: float) -> bool:
    """Whether an accuracy TFMA measured is below `bound`, by more than float32's rounding."""
    return value < bound - FLOAT32_ROUNDING


def _shown(value: float, bound: float) -> tuple[str, str]:
    """`value` and `bound` to 4 decimals, or as many more as it takes to tell them apart
    (44,999 of 50,000 is 0.89998, not "0.9000 is below the lower bound 0.9000")."""
    digits = 4
    while digits < 7 and f"{value:.{digits}f}" == f"{bound:.{digits}f}":
        digits += 1
    return f"{value:.{digits}f}", f"{bound:.{digits}f}"


# What a slice bound made of a slice (`SliceJudgment.outcome`).
MET = "met"
BELOW = "below"
NOT_JUDGED = "not judged"


@dataclasses.dataclass(frozen=True)
class SliceJudgment:
    """A slice of a kind `evaluator.slice_accuracy_lower_bounds` names, and what the bound
    made of it: MET, BELOW, or NOT_JUDGED when it holds fewer than
    `evaluator.slice_min_examples` eval examples (too few to be evidence of anything)."""

    kind: str
    value: str
    examples: int
    accuracy: float
    bound: float
    outcome: str

    def name(self) -> str:
        return f"{self.kind}={self.value}"


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Whether the candidate is blessed, each rule it missed in words, what the slice bounds
    made of each slice they name, and how it compared with the last blessed model (None: the
    first model)."""

    blessed: bool
    failures: list[str]
    slice_judgments: list[SliceJudgment]
    baseline_comparison: BaselineComparison | None
    rules: EvaluatorConfig

    @property
    def not_judged(self) -> list[SliceJudgment]:
        """The slices a bound names but holds too few examples to judge."""
        return [j for j in self.slice_judgments if j.outcome == NOT_JUDGED]

    def reason(self) -> str:
        """Why it was blessed or not, for the summary, the report and the model card."""
        if self.failures:
            reason = "; ".join(self.failures)
        elif self.baseline_comparison is not None:
            reason = f"passed every threshold; {self.baseline_comparison.describe()}"
        else:
            reason = "passed every threshold (first model: no baseline yet)"
        if self.not_judged:
            reason += f"; {self.describe_not_judged()}"
        return reason

    def describe_not_judged(self) -> str:
        """The slices a bound did not judge and why, or "" when it judged every one."""
        if not self.not_judged:
            return ""
        shown = ", ".join(
            f"{s.name()} ({s.examples} example{'s' if s.examples != 1 else ''})"
            for s in self.not_judged
        )
        return (
            f"not judged by the slice bounds, with fewer than {self.rules.slice_min_examples} "
            f"eval examples (evaluator.slice_min_examples): {shown}"
        )

    def to_json(self) -> str:
        return json.dumps(
            {
                "blessed": self.blessed,
                "failures": self.failures,
                "slice_judgments": [dataclasses.asdict(j) for j in self.slice_judgments],
                "baseline_comparison": dataclasses.asdict(self.baseline_comparison)
                if self.baseline_comparison
                else None,
                "rules": self.rules.model_dump(mode="json"),
            },
            indent=2,
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> Verdict:
        data: dict[str, Any] = json.loads(text)
        comparison = data["baseline_comparison"]
        return cls(
            blessed=data["blessed"],
            failures=data["failures"],
            slice_judgments=[SliceJudgment(**j) for j in data["slice_judgments"]],
            baseline_comparison=BaselineComparison(**comparison) if comparison else None,
            rules=EvaluatorConfig.model_validate(data["rules"]),
        )


def judge(
    accuracy: float | None,
    slices: Sequence[MeasuredSlice],
    paired: PairedCounts | None,
    rules: EvaluatorConfig,
) -> Verdict:
    """Applies the `evaluator:` rules to what TFMA measured of the candidate.

    Args:
      accuracy: the candidate's accuracy on the whole eval split.
      slices: its accuracy and example count on each slice (`results.slice_metrics`).
      paired: the examples only it or only the baseline gets right; None without a baseline.
      rules: the `evaluator:` section.
    """
    failures = []
    if accuracy is None:
        failures.append("TFMA measured no accuracy")
    elif _below(accuracy, rules.accuracy_lower_bound):
        value, bound = _shown(accuracy, rules.accuracy_lower_bound)
        failures.append(f"accuracy {value} is below the lower bound {bound}")
    comparison = None
    if paired is not None:
        comparison = compare_with_baseline(
            paired.candidate_right_only,
            paired.baseline_right_only,
            paired.examples,
            allowed_drop=rules.max_accuracy_drop,
            confidence=rules.baseline_confidence,
            test=rules.baseline_test,
        )
        if comparison.worse:
            failures.append(comparison.describe())
    judgments = []
    for kind, bound in rules.slice_accuracy_lower_bounds.items():
        of_kind = [s for s in slices if s.kind == kind]
        if not of_kind:
            failures.append(f"no eval example fell in a slice of {kind}, which a bound names")
        for s in of_kind:
            if s.examples < rules.slice_min_examples:
                outcome = NOT_JUDGED
            elif _below(s.accuracy, bound):
                outcome = BELOW
                value, shown_bound = _shown(s.accuracy, bound)
                failures.append(
                    f"accuracy on {s.kind}={s.value} {value} is below the lower bound {shown_bound}"
                )
            else:
                outcome = MET
            judgments.append(SliceJudgment(s.kind, s.value, s.examples, s.accuracy, bound, outcome))
    return Verdict(not failures, failures, judgments, comparison, rules)
