"""The report says when the training classes are unbalanced, from StatisticsGen's label counts."""

from pipeline.report.data_facts import DataFacts, FeatureSummary, SplitStatistics, class_imbalance


def _split(name: str, counts: list[float]) -> SplitStatistics:
    label = FeatureSummary(
        name="label",
        type="INT",
        present=int(sum(counts)),
        values_per_example=1.0,
        minimum=0.0,
        mean=0.0,
        std_dev=0.0,
        maximum=len(counts) - 1.0,
        zeros_percent=0.0,
        histogram=[(v - 0.5, v + 0.5, count) for v, count in enumerate(counts)],
    )
    return SplitStatistics(name, int(sum(counts)), [label])


def test_the_training_splits_largest_over_smallest_class_is_the_imbalance():
    splits = [_split("train", [300, 100, 30]), _split("eval", [10, 10, 10])]

    imbalance = class_imbalance(splits, "label")

    assert imbalance == 10.0
    assert DataFacts(splits, [], imbalance).unbalanced


def test_even_classes_are_not_called_unbalanced():
    splits = [_split("train", [100, 110, 95])]

    assert not DataFacts(splits, [], class_imbalance(splits, "label")).unbalanced
    assert class_imbalance(splits, "no_such_feature") is None
