"""The one blessing decision: the overall bound, the slice bounds on slices large enough to
judge, and the paired comparison with the last blessed model."""

from __future__ import annotations

import json

import numpy as np

from tpu_pipeline.common.config import EvaluatorConfig
from tpu_pipeline.components.evaluation.results import SliceMetrics
from tpu_pipeline.components.evaluation.verdict import (
    BELOW,
    MET,
    NOT_JUDGED,
    PairedCounts,
    Verdict,
    judge,
)

BOUNDED = EvaluatorConfig(accuracy_lower_bound=0.5, slice_accuracy_lower_bounds={"image_size": 0.8})
DOG_BOUND = EvaluatorConfig(accuracy_lower_bound=0.9, slice_accuracy_lower_bounds={"class": 0.9})
SLICES = [
    SliceMetrics("class", "cat", 200, 0.95),
    SliceMetrics("image_size", "up to 64 px", 199, 0.96),
    SliceMetrics("image_size", "over 512 px", 1, 0.0),  # one photo, wrong
]


def test_a_one_example_slice_below_its_bound_never_blocks_the_blessing():
    verdict = judge(0.95, SLICES, None, BOUNDED)

    assert verdict.blessed and verdict.failures == []
    assert [(j.name(), j.outcome) for j in verdict.slice_judgments] == [
        ("image_size=up to 64 px", MET),
        ("image_size=over 512 px", NOT_JUDGED),
    ]
    assert verdict.reason().endswith(
        "not judged by the slice bounds, with fewer than 20 eval examples "
        "(evaluator.slice_min_examples): image_size=over 512 px (1 example)"
    )


def test_a_slice_with_enough_examples_below_its_bound_refuses():
    slices = [*SLICES[:2], SliceMetrics("image_size", "over 512 px", 20, 0.7)]

    verdict = judge(0.95, slices, None, BOUNDED)

    assert not verdict.blessed
    assert verdict.failures == [
        "accuracy on image_size=over 512 px 0.7000 is below the lower bound 0.8000"
    ]
    assert verdict.slice_judgments[-1].outcome == BELOW


def test_a_bound_on_a_kind_no_example_fell_in_refuses():
    rules = EvaluatorConfig(slice_accuracy_lower_bounds={"span": 0.8})
    verdict = judge(0.95, SLICES, None, rules)
    assert verdict.failures == ["no eval example fell in a slice of span, which a bound names"]


def test_a_retrain_one_image_worse_on_a_small_eval_split_is_blessed():
    verdict = judge(0.95, SLICES, PairedCounts(4, 5, 347), EvaluatorConfig())

    assert verdict.blessed
    assert verdict.baseline_comparison.p_value == 0.5
    assert verdict.reason().startswith(
        "passed every threshold; not significantly worse than the last blessed model "
        "(accuracy -0.0029 on 347 eval examples: 5 right only for the last blessed model, "
        "4 only for the candidate; McNemar p = 0.5, refused below 0.05)"
    )


def test_a_clearly_worse_retrain_is_refused_however_high_its_accuracy():
    verdict = judge(0.95, SLICES, PairedCounts(2, 12, 347), EvaluatorConfig())

    assert not verdict.blessed
    assert verdict.failures == [verdict.baseline_comparison.describe()]
    assert verdict.baseline_comparison.worse


def test_the_overall_bound_still_refuses_a_model_as_good_as_its_baseline():
    verdict = judge(0.85, SLICES, PairedCounts(0, 0, 347), EvaluatorConfig())
    assert verdict.failures == ["accuracy 0.8500 is below the lower bound 0.9000"]


def test_an_accuracy_at_the_bound_meets_it_though_float32_reads_it_below():
    at_bound = float(np.float32(4500) / np.float32(5000))  # as TFMA reports 4,500 of 5,000
    assert at_bound < 0.9

    verdict = judge(at_bound, [SliceMetrics("class", "dog", 500, at_bound)], None, DOG_BOUND)

    assert verdict.blessed and verdict.failures == []
    assert [j.outcome for j in verdict.slice_judgments] == [MET]


def test_an_accuracy_one_example_below_the_bound_is_refused_with_the_digits_that_show_it():
    one_below = float(np.float32(44_999) / np.float32(50_000))
    slices = [SliceMetrics("class", "dog", 5_000, float(np.float32(4_499) / np.float32(5_000)))]

    verdict = judge(one_below, slices, None, DOG_BOUND)

    assert not verdict.blessed
    assert verdict.failures == [
        "accuracy 0.89998 is below the lower bound 0.90000",
        "accuracy on class=dog 0.8998 is below the lower bound 0.9000",
    ]


def test_the_verdict_reads_back_as_written():
    verdict = judge(0.95, SLICES, PairedCounts(4, 5, 347), BOUNDED)

    again = Verdict.from_json(verdict.to_json())

    assert again == verdict
    written = json.loads(verdict.to_json())
    assert written["baseline_comparison"]["p_value"] == 0.5
    assert written["rules"]["baseline_confidence"] == 0.95
