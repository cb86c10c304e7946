"""The report's data section repeats ExampleGen's line about images odd among the rest."""

from tpu_pipeline.components.example_gen.odd_images import ImageFact, find_odd_images
from tpu_pipeline.pipeline.report.collect import RunReport
from tpu_pipeline.pipeline.report.data_facts import DataFacts, SplitStatistics
from tpu_pipeline.pipeline.report.html import render_html
from tpu_pipeline.pipeline.results.run_summary import RunSummary


def _report(data: DataFacts) -> RunReport:
    summary = RunSummary(
        pipeline="tpu-pipeline-photos",
        succeeded=True,
        data_rejected=False,
        error=None,
        components=[],
        metrics={},
        baseline_metrics=None,
        blessed=False,
        blessing_reason="",
        pushed_model=None,
        push_note="",
        trainer=None,
        tuning=None,
        log_file=None,
    )
    return RunReport("tpu-pipeline-photos", None, "/run", summary, "trained", None, {}, data=data)


def test_the_data_section_names_the_odd_images_examplegen_found_only_when_there_are_some():
    facts = [ImageFact(f"cats/{i}.jpg", 0, None, "jpeg", 400, 400, bytes([i])) for i in range(20)]
    facts.append(ImageFact("cats/not-found.gif", 0, None, "gif", 400, 400, b"gif"))
    line = find_odd_images(facts).line()
    splits = [SplitStatistics("train", 21, [])]

    html = render_html(_report(DataFacts(splits, [], None, odd_images=line)), {})
    plain = render_html(_report(DataFacts(splits, [], None)), {})

    assert '<p id="odd-images">' in html
    assert "1 of a format unlike the rest (cats/not-found.gif)" in html
    assert "odd-images" not in plain
