"""The paired comparison with the last blessed model: McNemar's exact test on the examples
exactly one of the two models gets right, refusing only a candidate significantly worse."""

from __future__ import annotations

import typing

import pytest
from scipy import stats

from tpu_pipeline.common.config.evaluator import BaselineTest
from tpu_pipeline.components.evaluation.baseline_test import (
    ACCURACY_DROP,
    MCNEMAR,
    compare_with_baseline,
)

# The built-in digits' eval split.
EXAMPLES = 347


def _compare(candidate_only: int, baseline_only: int, **rule) -> object:
    return compare_with_baseline(
        candidate_only,
        baseline_only,
        EXAMPLES,
        **{"allowed_drop": 0.0, "confidence": 0.95, "test": MCNEMAR, **rule},
    )


def test_a_retrain_one_image_worse_is_not_refused():
    """Issue 46: 5 images only the baseline got right, 4 only the retrain; chance explains it
    (p = 0.5). Refusing any drop, as max_accuracy_drop 0 did, refuses it."""
    compared = _compare(4, 5)

    assert not compared.worse
    assert compared.p_value == pytest.approx(0.5)  # P(at least 5 heads of 9 tosses)
    assert compared.accuracy_change == pytest.approx(-1 / EXAMPLES)
    assert _compare(4, 5, test=ACCURACY_DROP).worse


def test_a_retrain_three_points_worse_is_refused():
    """12 images only the baseline got right, 2 only the retrain: about 3 points of 347."""
    compared = _compare(2, 12)

    assert compared.worse
    assert compared.p_value == pytest.approx((1 + 14 + 91) / 2**14)  # P(>= 12 of 14)
    assert compared.describe() == (
        "significantly worse than the last blessed model (accuracy -0.0288 on 347 eval "
        "examples: 12 right only for the last blessed model, 2 only for the candidate; "
        "McNemar p = 0.0065, refused below 0.05)"
    )


def test_the_p_value_is_the_one_sided_exact_binomial_on_the_discordant_examples():
    for candidate_only, baseline_only in [(0, 3), (3, 7), (10, 25), (7, 7)]:
        expected = stats.binom.sf(baseline_only - 1, candidate_only + baseline_only, 0.5)
        assert _compare(candidate_only, baseline_only).p_value == pytest.approx(expected)


def test_the_confidence_decides_how_much_evidence_refuses():
    """3 of 3 discordant examples to the baseline: p = 1/8, refused only at 0.8 confidence."""
    assert _compare(0, 3, confidence=0.8).worse
    assert not _compare(0, 3, confidence=0.95).worse


def test_an_allowed_drop_is_tolerated_however_sure_the_test_is():
    """10 of 11 discordant examples to the baseline is a sure drop (p = 0.006), of
    9 / 347 = 0.026: refused with no drop allowed, blessed with 0.03 allowed."""
    assert _compare(1, 10).worse
    allowed = _compare(1, 10, allowed_drop=0.03)
    assert not allowed.worse and allowed.p_value > 0.05
    # A drop no larger than the discordant examples can show is never refused.
    assert _compare(0, 10, allowed_drop=10 / EXAMPLES).p_value == 1.0


def test_models_that_agree_everywhere_are_not_refused():
    compared = _compare(0, 0)
    assert not compared.worse and compared.p_value == 1.0 and compared.accuracy_change == 0.0


def test_a_better_retrain_says_whether_chance_explains_it():
    """Better by noise is blessed as before, but the verdict no longer reads as progress."""
    assert _compare(5, 4).describe().endswith("; not significantly better (p = 0.5)")
    assert _compare(12, 2).describe().endswith("; significantly better (p = 0.0065)")


def test_the_tests_are_the_ones_the_configuration_offers():
    assert set(typing.get_args(BaselineTest)) == {MCNEMAR, ACCURACY_DROP}
