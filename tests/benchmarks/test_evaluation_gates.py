"""The simulated retrains behind `evaluator.baseline_confidence`'s default
(docs/evaluation-gates.md), few enough to run in a second: the old rule stalls on noise,
the default does not, and it still refuses most of a 3-point drop on digits."""

from __future__ import annotations

import numpy as np

from benchmarks.evaluation_gates import TASKS, refusal_rate
from tpu_pipeline.common.config import EvaluatorConfig
from tpu_pipeline.components.evaluation.baseline_test import ACCURACY_DROP, MCNEMAR

DIGITS = TASKS[0]  # as measured: 347 eval examples, retrains disagree on about 4
TRIALS = 300


def _rate(worse_by: float, confidence: float, test: str) -> float:
    return refusal_rate(DIGITS, np.random.default_rng(0), TRIALS, worse_by, confidence, test)


def test_the_default_blesses_noise_that_the_old_rule_refused():
    default = EvaluatorConfig().baseline_confidence

    assert _rate(0.0, default, MCNEMAR) <= 0.05  # at most 1 same-quality retrain in 20
    assert _rate(0.0, default, ACCURACY_DROP) > 0.25  # the old rule: over 1 in 4


def test_the_default_refuses_most_retrains_three_points_worse_on_digits():
    assert _rate(0.03, EvaluatorConfig().baseline_confidence, MCNEMAR) > 0.75
