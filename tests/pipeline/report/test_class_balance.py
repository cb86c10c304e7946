"""The report says when the training classes are unbalanced, from StatisticsGen's label counts."""

from tests.pipeline.report.label_statistics import label_split
from tpu_pipeline.pipeline.report.data_facts import DataFacts, class_imbalance


def test_the_training_splits_largest_over_smallest_class_is_the_imbalance():
    splits = [label_split("train", [300, 100, 30]), label_split("eval", [10, 10, 10])]

    imbalance = class_imbalance(splits, "label")

    assert imbalance == 10.0
    assert DataFacts(splits, [], imbalance).unbalanced


def test_even_classes_are_not_called_unbalanced():
    splits = [label_split("train", [100, 110, 95])]

    assert not DataFacts(splits, [], class_imbalance(splits, "label")).unbalanced
    assert class_imbalance(splits, "no_such_feature") is None
