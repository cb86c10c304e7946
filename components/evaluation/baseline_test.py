"""Is the candidate worse than the last blessed model, or only unlucky on this eval split?

Both models answer the same eval examples, so their accuracies are not two independent
estimates: they differ only on the examples exactly one of them gets right (the discordant
pairs). Of those n examples, b went to the baseline and c to the candidate; the examples
both get right or both get wrong say nothing about which is better. McNemar's exact test
asks how likely b or more of n is if each discordant example were a coin toss: a retrain
that differs from its baseline by noise splits them evenly, a worse one gives the baseline
most of them.

With an allowed drop d (`evaluator.max_accuracy_drop`) the coin is the one under which the
candidate is exactly d worse: given n discordant examples of N, a drop of d means
E[b - c] = d * N, so each discordant example goes to the baseline with probability
1/2 + d * N / (2 n) (1 or more: n examples cannot show a drop beyond d, so no refusal). The
candidate is refused when the one-sided p-value, P(at least b of n to the baseline), is
below 1 - `evaluator.baseline_confidence`. With d = 0 this is McNemar's exact test.
"""

from __future__ import annotations

import dataclasses

from scipy import stats

from tpu_pipeline.common.config import BaselineTest

MCNEMAR = "mcnemar"
ACCURACY_DROP = "accuracy_drop"
# The old rule's margin: a model exactly as good as its baseline passes despite float error.
_EPSILON = 1e-10


@dataclasses.dataclass(frozen=True)
class BaselineComparison:
    """The candidate against the last blessed model on the same eval examples.

    `p_value` is the chance of the baseline winning `baseline_right_only` or more of the
    discordant examples were the candidate exactly `allowed_drop` worse (None under the
    `accuracy_drop` rule, which tests nothing); `p_value_better` the chance of the candidate
    winning `candidate_right_only` or more were the two equally good. `worse` refuses the
    blessing.
    """

    test: BaselineTest  # MCNEMAR or ACCURACY_DROP (`evaluator.baseline_test`)
    examples: int  # eval examples both models answered
    candidate_right_only: int
    baseline_right_only: int
    allowed_drop: float
    confidence: float
    p_value: float | None
    p_value_better: float | None
    worse: bool

    @property
    def accuracy_change(self) -> float:
        """The candidate's accuracy minus the baseline's on these examples."""
        if not self.examples:
            return 0.0
        return (self.candidate_right_only - self.baseline_right_only) / self.examples

    def how_sure(self) -> str:
        """How sure the change is, in a few words: what the report's first screen shows beside
        the two accuracies (`describe` gives the evidence)."""
        if self.test == ACCURACY_DROP:
            return f"not tested against chance (evaluator.baseline_test: {ACCURACY_DROP})"
        at = f"at {self.confidence:.0%} confidence"
        if self.worse:
            return f"significantly worse {at} (McNemar p = {self.p_value:.2g})"
        if self.candidate_right_only > self.baseline_right_only:
            if self.p_value_better < 1 - self.confidence:
                return f"significantly better {at} (McNemar p = {self.p_value_better:.2g})"
            return (
                f"not significantly better {at}: could be chance "
                f"(McNemar p = {self.p_value_better:.2g})"
            )
        return f"not significantly worse {at} (McNemar p = {self.p_value:.2g})"

    def describe(self) -> str:
        """The verdict and its evidence in one phrase, e.g. `not significantly worse than
        the last blessed model (accuracy -0.0029 on 347 eval examples: 5 right only for the
        last blessed model, 4 only for the candidate; McNemar p = 0.5, refused below 0.05)`."""
        evidence = (
            f"accuracy {self.accuracy_change:+.4f} on {self.examples:,} eval examples: "
            f"{self.baseline_right_only} right only for the last blessed model, "
            f"{self.candidate_right_only} only for the candidate"
        )
        if self.test == ACCURACY_DROP:
            verdict = "dropped by more than" if self.worse else "within"
            return (
                f"{verdict} the allowed {self.allowed_drop:.4f} against the last blessed model "
                f"({evidence}; no test of chance, evaluator.baseline_test: {ACCURACY_DROP})"
            )
        beyond = f" by more than {self.allowed_drop:.4f}" if self.allowed_drop else ""
        verdict = "significantly worse" if self.worse else "not significantly worse"
        test = f"McNemar p = {self.p_value:.2g}, refused below {1 - self.confidence:.2g}"
        better = ""
        if not self.worse and self.candidate_right_only > self.baseline_right_only:
            significant = self.p_value_better < 1 - self.confidence
            better = "; significantly better" if significant else "; not significantly better"
            better += f" (p = {self.p_value_better:.2g})"
        return f"{verdict} than the last blessed model{beyond} ({evidence}; {test}){better}"


def compare_with_baseline(
    candidate_right_only: int,
    baseline_right_only: int,
    examples: int,
    *,
    allowed_drop: float,
    confidence: float,
    test: BaselineTest = MCNEMAR,
) -> BaselineComparison:
    """Judges the candidate against the baseline from the paired counts (module docstring).

    Args:
      candidate_right_only: eval examples the candidate gets right and the baseline wrong.
      baseline_right_only: eval examples the baseline gets right and the candidate wrong.
      examples: eval examples both answered.
      allowed_drop: the accuracy the candidate may lose (`evaluator.max_accuracy_drop`).
      confidence: how sure the test must be that it lost more (`evaluator.baseline_confidence`).
      test: MCNEMAR, or ACCURACY_DROP to refuse any observed drop beyond `allowed_drop`.
    """
    counts = dict(
        test=test,
        examples=examples,
        candidate_right_only=candidate_right_only,
        baseline_right_only=baseline_right_only,
        allowed_drop=allowed_drop,
        confidence=confidence,
    )
    if test == ACCURACY_DROP:
        drop = (baseline_right_only - candidate_right_only) / examples if examples else 0.0
        return BaselineComparison(
            **counts, p_value=None, p_value_better=None, worse=drop > allowed_drop + _EPSILON
        )
    p_value = worse_p_value(candidate_right_only, baseline_right_only, examples, allowed_drop)
    p_value_better = worse_p_value(baseline_right_only, candidate_right_only, examples, 0.0)
    return BaselineComparison(
        **counts,
        p_value=p_value,
        p_value_better=p_value_better,
        worse=p_value < 1 - confidence,
    )


def worse_p_value(
    candidate_right_only: int, baseline_right_only: int, examples: int, allowed_drop: float
) -> float:
    """One-sided p-value that the candidate is more than `allowed_drop` worse: P(the
    baseline wins at least `baseline_right_only` of the discordant examples) were it exactly
    that much worse; 1.0 when the discordant examples cannot show such a drop."""
    discordant = candidate_right_only + baseline_right_only
    if discordant == 0 or baseline_right_only == 0:
        return 1.0
    to_baseline = 0.5 + allowed_drop * examples / (2 * discordant)
    if to_baseline >= 1.0:
        return 1.0
    return float(
        stats.binomtest(baseline_right_only, discordant, to_baseline, alternative="greater").pvalue
    )
