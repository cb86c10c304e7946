"""Which answers to explain: the most confident mistakes first, then correct answers per class.

A confident mistake is what a reviewer most needs to see (the model is sure and
wrong); a correct answer per class shows what the model looks at when it is right,
so a map of a mistake can be read against it.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class Chosen:
    """One answer to explain: where it is in the examined examples and what it was."""

    index: int
    label: int | None  # None: unlabelled images (a batch job)
    predicted: int
    probability: float  # of the predicted class
    source: str | None = None  # a batch job's "path:index"; the Trainer's are eval examples

    @property
    def mistake(self) -> bool:
        return self.label is not None and self.label != self.predicted

    def as_json(self) -> dict:
        return {**dataclasses.asdict(self), "mistake": self.mistake}


def _chosen(index: int, probabilities: np.ndarray, labels: np.ndarray | None) -> Chosen:
    predicted = int(np.argmax(probabilities[index]))
    return Chosen(
        index=int(index),
        label=None if labels is None else int(labels[index]),
        predicted=predicted,
        probability=float(probabilities[index, predicted]),
    )


def choose_answers(
    probabilities: np.ndarray, labels: np.ndarray, mistakes: int, correct_per_class: int
) -> list[Chosen]:
    """Up to `mistakes` wrong answers, most confident first, then up to `correct_per_class`
    right answers of each class (most confident first), in class order.

    Ties keep the examples' order, so the same answers give the same choice.
    """
    predicted = np.argmax(probabilities, axis=1)
    confidence = probabilities[np.arange(len(predicted)), predicted]
    by_confidence = np.argsort(-confidence, kind="stable")
    wrong = [i for i in by_confidence if predicted[i] != labels[i]][:mistakes]
    right = []
    for cls in range(probabilities.shape[1]):
        right += [i for i in by_confidence if labels[i] == cls == predicted[i]][:correct_per_class]
    return [_chosen(i, probabilities, labels) for i in [*wrong, *right]]
