"""Balanced class weights: rare classes weigh more, the loss keeps its scale."""

import pytest

from tpu_pipeline.components.training.class_weights import balanced_class_weights, imbalance


def test_balanced_weights_make_every_class_weigh_the_same_in_total():
    counts = [900, 90, 10]

    weights = balanced_class_weights(counts)

    totals = [count * weight for count, weight in zip(counts, weights, strict=True)]
    assert totals == pytest.approx([sum(counts) / 3] * 3)
    # Averaged over the examples the weight is 1: the learning rate keeps its meaning.
    assert sum(totals) / sum(counts) == pytest.approx(1.0)


def test_a_class_without_examples_weighs_nothing_and_does_not_skew_the_others():
    assert balanced_class_weights([50, 0, 50]) == (1.0, 0.0, 1.0)


def test_no_training_examples_is_an_error():
    with pytest.raises(ValueError, match="no training examples"):
        balanced_class_weights([0, 0])


def test_imbalance_is_the_largest_over_the_smallest_present_class():
    assert imbalance([900, 90, 10, 0]) == 90.0
    assert imbalance([5, 5]) == 1.0
