"""A TFMA metric that pairs the candidate's answers with the baseline's, example by example.

The accuracy of each model says how many eval examples it got right; whether a difference
between them is more than chance depends on which examples: two retrains that agree on all
but 6 images and split those 3 to 3 are the same model, whatever their accuracies say. This
metric counts, on every slice, the examples only the candidate gets right and the examples
only the baseline gets right (the discordant pairs of McNemar's test,
`components/evaluation/baseline_test.py`). TFMA runs it beside the other metrics, on the
same examples in the same pass, and writes the counts into the evaluation as diff metrics of
the candidate (TFMA's own flip-rate metrics are built the same way, for binary outputs).

TFMA imports this module by name (`MetricConfig.module`) wherever the Evaluator runs, so it
stays here and imports nothing of ours.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import apache_beam as beam
import numpy as np
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.metrics import metric_types, metric_util
from tensorflow_model_analysis.utils import model_util

MODULE = __name__
CLASS_NAME = "DiscordantPairs"
# The metrics it writes (diff metrics of the candidate, beside TFMA's own diffs).
CANDIDATE_RIGHT_ONLY = "candidate_right_only"
BASELINE_RIGHT_ONLY = "baseline_right_only"
PAIRED_EXAMPLES = "paired_examples"
NAMES = (CANDIDATE_RIGHT_ONLY, BASELINE_RIGHT_ONLY, PAIRED_EXAMPLES)


@dataclasses.dataclass
class _Counts:
    candidate_right_only: int = 0
    baseline_right_only: int = 0
    examples: int = 0

    def add(self, other: _Counts) -> None:
        self.candidate_right_only += other.candidate_right_only
        self.baseline_right_only += other.baseline_right_only
        self.examples += other.examples


def _right(label: np.ndarray, prediction: np.ndarray) -> bool:
    """Whether the top class is the label, as SparseCategoricalAccuracy counts it (the first
    of equal top probabilities wins)."""
    return int(np.argmax(prediction)) == int(np.asarray(label).reshape(-1)[0])


class _DiscordantPairsCombiner(beam.CombineFn):
    def __init__(self, keys, eval_config, candidate: str, baseline: str, output_name: str):
        self._keys = keys
        self._eval_config = eval_config
        self._candidate = candidate
        self._baseline = baseline
        self._output_name = output_name

    def _label_and_prediction(self, element, model_name: str):
        label, prediction, _ = next(
            metric_util.to_label_prediction_example_weight(
                inputs=element,
                eval_config=self._eval_config,
                model_name=model_name,
                output_name=self._output_name,
                flatten=False,
            )
        )
        return label, prediction

    def create_accumulator(self) -> _Counts:
        return _Counts()

    def add_input(self, accumulator: _Counts, element) -> _Counts:
        label, candidate = self._label_and_prediction(element, self._candidate)
        _, baseline = self._label_and_prediction(element, self._baseline)
        candidate_right, baseline_right = _right(label, candidate), _right(label, baseline)
        accumulator.add(
            _Counts(
                int(candidate_right and not baseline_right),
                int(baseline_right and not candidate_right),
                1,
            )
        )
        return accumulator

    def merge_accumulators(self, accumulators: Iterable[_Counts]) -> _Counts:
        merged = _Counts()
        for accumulator in accumulators:
            merged.add(accumulator)
        return merged

    def extract_output(self, accumulator: _Counts) -> dict:
        candidate_only, baseline_only, examples = self._keys
        return {
            candidate_only: float(accumulator.candidate_right_only),
            baseline_only: float(accumulator.baseline_right_only),
            examples: float(accumulator.examples),
        }


def _discordant_pairs(
    name: str = CLASS_NAME, eval_config=None, model_names=None, output_names=None
) -> metric_types.MetricComputations:
    """One computation per candidate model and output; none without a baseline (a first
    run has nothing to pair with). `name` is TFMA's; the counts have their own names."""
    del name
    baseline = model_util.get_baseline_model_spec(eval_config) if eval_config else None
    if baseline is None:
        return []
    computations = []
    for candidate in model_names or [""]:
        if candidate == baseline.name:
            continue
        for output_name in output_names or [""]:
            keys = [
                metric_types.MetricKey(
                    name=name, model_name=candidate, output_name=output_name, is_diff=True
                )
                for name in NAMES
            ]
            computations.append(
                metric_types.MetricComputation(
                    keys=keys,
                    preprocessors=None,
                    combiner=_DiscordantPairsCombiner(
                        keys, eval_config, candidate, baseline.name, output_name
                    ),
                )
            )
    return computations


class DiscordantPairs(tfma.metrics.Metric):
    """Eval examples only the candidate gets right, only the baseline gets right, and all
    examples both answered, per slice (a sparse label, a probability per class)."""

    def __init__(self, name: str = "discordant_pairs"):
        super().__init__(_discordant_pairs, name=name)

    @property
    def compute_confidence_interval(self) -> bool:
        return False  # counts, not estimates
