"""The candidate against the last blessed model through TFMA's real output: TFMA counts the
eval examples only one of the two models gets right, the Evaluator's verdict judges them
with McNemar's exact test, and the run summary carries the verdict and its confidence."""

from __future__ import annotations

import json

import numpy as np
from scipy import stats

from tests.pipeline.tfma_results import NAMES, write_evaluation
from tpu_pipeline.common.config import EvaluatorConfig
from tpu_pipeline.components.evaluation.results import read_verdict
from tpu_pipeline.components.evaluator import judge_evaluation
from tpu_pipeline.pipeline.results.run_summary import RunSummary

EXAMPLES = 347  # the built-in digits' eval split
LABELS = np.arange(EXAMPLES) % len(NAMES)


def _answers(wrong: range | list[int]) -> np.ndarray:
    """Probabilities that are right on every example but those in `wrong`."""
    answers = np.eye(len(NAMES))[LABELS] * 0.9 + 0.025
    for index in wrong:
        answers[index] = np.roll(answers[index], 1)  # the next class instead
    return answers


def _summary(output: str) -> RunSummary:
    summary = RunSummary.without_results("p", [], None, None)
    summary.class_names = list(NAMES)
    summary.add_evaluation(output, read_verdict(output).blessed, EvaluatorConfig())
    return summary


def test_a_retrain_one_image_worse_is_blessed_with_its_confidence_in_the_summary(tmp_path):
    """The baseline misses 0-9; the retrain gets 0-4 right and misses 10-15 instead: 6
    examples only the baseline gets right, 5 only the retrain. `max_accuracy_drop: 0` alone
    refused it; the paired test blesses it, saying how likely chance makes it."""
    output = write_evaluation(
        str(tmp_path),
        LABELS,
        _answers(range(5, 16)),
        baseline_probabilities=_answers(range(10)),
    )

    summary = _summary(output)

    assert summary.blessed, summary.blessing_reason
    p_value = stats.binom.sf(6 - 1, 11, 0.5)  # at least 6 of 11 fair coin tosses
    assert json.loads(summary.to_json())["baseline_comparison"] == {
        "test": "mcnemar",
        "examples": EXAMPLES,
        "candidate_right_only": 5,
        "baseline_right_only": 6,
        "allowed_drop": 0.0,
        "confidence": 0.95,
        "p_value": p_value,
        "p_value_better": stats.binom.sf(5 - 1, 11, 0.5),
        "worse": False,
    }
    blessed_line = next(line for line in summary.to_text().splitlines() if "blessed" in line)
    assert f"McNemar p = {p_value:.2g}, refused below 0.05" in blessed_line
    # The old rule, judging the same TFMA output, refuses it for one image.
    assert not judge_evaluation(
        output, EvaluatorConfig(baseline_test="accuracy_drop"), NAMES
    ).blessed


def test_a_retrain_three_points_worse_is_refused(tmp_path):
    """The retrain gets 0-1 right that the baseline misses, and misses 10-21 the baseline
    gets right: 12 to 2, about 3 points of 347, though it clears the 0.9 bound."""
    output = write_evaluation(
        str(tmp_path),
        LABELS,
        _answers([*range(2, 10), *range(10, 22)]),
        baseline_probabilities=_answers(range(10)),
    )

    summary = _summary(output)

    assert summary.metrics["accuracy"] > 0.9
    assert not summary.blessed
    compared = summary.baseline_comparison
    assert (compared.candidate_right_only, compared.baseline_right_only) == (2, 12)
    assert compared.worse and compared.p_value < 0.05
    assert summary.blessing_reason == compared.describe()


def test_how_sure_says_better_worse_or_chance_at_the_confidence_asked():
    from tpu_pipeline.components.evaluation.baseline_test import compare_with_baseline

    def how_sure(candidate_only, baseline_only):
        return compare_with_baseline(
            candidate_only, baseline_only, 347, allowed_drop=0.0, confidence=0.95
        ).how_sure()

    assert how_sure(9, 1).startswith("significantly better at 95% confidence (McNemar p = 0.0")
    assert how_sure(5, 4).startswith("not significantly better at 95% confidence: could be chance")
    assert how_sure(1, 9).startswith("significantly worse at 95% confidence (McNemar p = 0.0")
    assert how_sure(4, 5).startswith("not significantly worse at 95% confidence (McNemar p = ")


def test_a_model_the_span_shift_gate_holds_back_is_refused_whatever_its_figures(tmp_path):
    """Better than its baseline and above every bound, but its span moved: not blessed, so it
    never becomes the baseline of the next run; the verdict beside TFMA's output says why."""
    output = write_evaluation(
        str(tmp_path), LABELS, _answers([]), baseline_probabilities=_answers(range(10))
    )
    hold = "held back by drift.block_push: the new span's images moved from the served model's"

    verdict = judge_evaluation(output, EvaluatorConfig(), NAMES, held_back=hold)

    assert not verdict.blessed and verdict.failures == [hold]
    assert read_verdict(output) == verdict
    assert judge_evaluation(output, EvaluatorConfig(), NAMES).blessed  # the figures alone bless
