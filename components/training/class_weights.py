"""Loss weights per class, so a rare class counts as much as a common one (`class_weight`)."""

from __future__ import annotations


def balanced_class_weights(counts: list[int]) -> tuple[float, ...]:
    """Each class weighs total / (classes x its count), scikit-learn's "balanced".

    The weights average 1 over the training examples, so the loss keeps its scale
    and the learning rate its meaning. A class with no training example gets 0
    (nothing of it is ever weighed).

    Raises:
      ValueError: there is no training example at all.
    """
    total = sum(counts)
    if not total:
        raise ValueError("no training examples to weigh classes by")
    present = sum(1 for count in counts if count)
    return tuple(total / (present * count) if count else 0.0 for count in counts)


def imbalance(counts: list[int]) -> float:
    """The largest class's count over the smallest present class's (1.0: balanced)."""
    present = [count for count in counts if count]
    return max(present) / min(present) if present else 1.0
