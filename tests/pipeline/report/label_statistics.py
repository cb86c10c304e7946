"""A split's label statistics as `data_facts` reads them from TFDV, for tests of what uses them."""

from tpu_pipeline.pipeline.report.data_facts import FeatureSummary, SplitStatistics


def label_split(name: str, counts: list[float]) -> SplitStatistics:
    """Split `name` whose only feature is a categorical `label` with `counts` per class value."""
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
