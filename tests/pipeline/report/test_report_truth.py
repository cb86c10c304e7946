"""Every sentence of the report is true of the run it reports, whatever the run's outcome.

Each outcome's page is built from a real run's artifacts: the shared digits run
(blessed and pushed), the same artifacts with the facts of a run the Evaluator
refused, a real rejected run, and the digits run's data with a Trainer that
failed or was interrupted. `page_claims` then checks each section's sentences
against the facts the page was built from.
"""

from __future__ import annotations

import dataclasses
import signal

import pytest

from tests.pipeline.report.page_claims import SECTIONS, false_sentences, published_cells, read_page
from tpu_pipeline.pipeline.report import write_report_files
from tpu_pipeline.pipeline.report.collect import RunReport, collect_report, describe_outcome
from tpu_pipeline.pipeline.results.run_summary import ComponentResult, RunSummary

pytestmark = pytest.mark.slow  # every outcome reads a real pipeline run

OUTCOMES = [
    "blessed and pushed",
    "blessed and pushed, rebuilt from the run folder",
    "not blessed, schema bootstrapped",
    "blessed and pushed, a new span of inverted images",
    "blessed and pushed, explained with Grad-CAM",
    "data rejected, rebuilt from the run folder",
    "failed in the Trainer",
    "interrupted in the Trainer",
]


@pytest.fixture(scope="module")
def digits_facts(digits_run) -> RunReport:
    config, summary = digits_run
    return collect_report(config.run_dir, summary, config)


def _refused(digits_run) -> RunReport:
    """The digits run's artifacts with the facts of a refused run whose schema it wrote itself,
    as on a new dataset's first run: not blessed, nothing pushed."""
    config, summary = digits_run
    refused = dataclasses.replace(
        summary,
        blessed=False,
        blessing_reason="accuracy did not beat the last blessed model by the change threshold",
        pushed_model=None,
        push_note="not blessed",
        serving_check=None,
        serving_check_server=None,
        model_card=None,
        serving_variants=[{**variant, "path": None} for variant in summary.serving_variants],
        schema_bootstrapped=str(config.dataset.resolved_schema_file),
    )
    return collect_report(config.run_dir, refused, config)


def _explained_with_grad_cam(digits_run, facts: RunReport) -> RunReport:
    """The same answers explained with Grad-CAM on the served model, as explain.method asks."""
    from tests.pipeline.e2e_helpers import split_files
    from tpu_pipeline.common.config import ExplainConfig
    from tpu_pipeline.components.explain.eval_split import explain_images
    from tpu_pipeline.components.serving.answers import PixelClassifier, eval_pixels

    config, summary = digits_run
    chosen = facts.attributions.chosen
    found = eval_pixels(split_files(config, "eval"), config.dataset, [c.index for c in chosen])
    explained = explain_images(
        PixelClassifier(summary.pushed_model),
        [found[c.index] for c in chosen],
        chosen,
        config.dataset,
        ExplainConfig(method="grad_cam"),
    )
    explained.settings["examined_examples"] = facts.attributions.settings["examined_examples"]
    return dataclasses.replace(facts, attributions=explained)


def _shifted_span(facts: RunReport) -> RunReport:
    """The digits run, as if it had trained on a span of inverted digits: its span shift is
    the real comparison of half the digits, inverted, with the other half."""
    import numpy as np
    from sklearn.datasets import load_digits

    from tpu_pipeline.common.config import DriftConfig
    from tpu_pipeline.components.drift.reference import Reference
    from tpu_pipeline.components.drift.signals import pixel_signals
    from tpu_pipeline.components.drift.span_shift import compare_training_images

    images = load_digits().images.astype(np.float32)[..., None]

    def reference(pixels):
        return Reference(pixel_signals(pixels), {"confidence": np.ones(len(pixels))})

    check = compare_training_images(
        reference(16 - images[1::2]), reference(images[::2]), DriftConfig()
    )
    shift = {**check.to_json(), "headline": check.headline("span shift")}
    return dataclasses.replace(facts, summary=dataclasses.replace(facts.summary, span_shift=shift))


def _stopped_in_trainer(facts: RunReport, error: BaseException, status: str) -> RunReport:
    """The digits run's data, with a Trainer that `status` (failed, interrupted) on `error`."""
    order = [c.id for c in facts.summary.components]
    trainer = order.index("Trainer")
    components = [
        ComponentResult(node, "executed" if index < trainer else "skipped", 1.0)
        for index, node in enumerate(order)
    ]
    components[trainer] = ComponentResult("Trainer", status, 1.0)
    summary = RunSummary.without_results(facts.pipeline, components, error, "/runs/run.log")
    return dataclasses.replace(
        facts,
        summary=summary,
        outcome=describe_outcome(summary),
        training=None,
        evaluation=None,
        deployment=None,
        samples=None,
        attributions=None,
    )


@pytest.fixture(scope="module", params=OUTCOMES)
def outcome_page(request, digits_run, digits_facts, tmp_path_factory):
    """(the facts, the page read back) of one outcome, written as `tpu-pipeline run` writes it."""
    outcome = request.param
    if outcome == "blessed and pushed":
        report = digits_facts
    elif outcome == "blessed and pushed, rebuilt from the run folder":
        report = collect_report(digits_run[0].run_dir)
    elif outcome == "not blessed, schema bootstrapped":
        report = _refused(digits_run)
    elif outcome == "blessed and pushed, a new span of inverted images":
        report = _shifted_span(digits_facts)
    elif outcome == "blessed and pushed, explained with Grad-CAM":
        report = _explained_with_grad_cam(digits_run, digits_facts)
    elif outcome == "data rejected, rebuilt from the run folder":
        _, run_dir = request.getfixturevalue("rejected_run")
        report = collect_report(run_dir)
    elif outcome == "failed in the Trainer":
        error = RuntimeError("Trainer: ResourceExhaustedError: out of memory")
        report = _stopped_in_trainer(digits_facts, error, "failed")
    else:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(
                "tpu_pipeline.pipeline.results.parts.outcome.received_signal", lambda: signal.SIGINT
            )
            report = _stopped_in_trainer(digits_facts, KeyboardInterrupt(), "interrupted")
    files = write_report_files(report, tmp_path_factory.mktemp("report"))
    return outcome, report, read_page(files.html.read_text(encoding="utf-8"))


@pytest.mark.parametrize("section", SECTIONS)
def test_every_sentence_of_each_section_is_true_of_the_run(outcome_page, section):
    _, report, page = outcome_page

    assert false_sentences(page, report, section) == []


def test_the_outcomes_are_the_ones_named(outcome_page):
    outcome, report, _ = outcome_page
    summary = report.summary
    expected = {
        "blessed and pushed": (True, True, False, False),
        "blessed and pushed, rebuilt from the run folder": (True, True, False, False),
        "not blessed, schema bootstrapped": (False, False, False, False),
        "blessed and pushed, a new span of inverted images": (True, True, False, False),
        "blessed and pushed, explained with Grad-CAM": (True, True, False, False),
        "data rejected, rebuilt from the run folder": (False, False, True, False),
        "failed in the Trainer": (False, False, False, False),
        "interrupted in the Trainer": (False, False, False, True),
    }[outcome]
    pushed = summary.pushed_model is not None
    assert (summary.blessed, pushed, summary.data_rejected, bool(summary.interrupted)) == expected


def test_a_variant_is_called_published_only_when_a_model_was_pushed(outcome_page):
    _, report, page = outcome_page
    cells = published_cells(page)
    variants = report.summary.serving_variants

    assert len(cells) == len(variants)
    for cell, variant in zip(cells, variants, strict=True):
        assert (cell == "yes") == (variant["path"] is not None), (cell, variant)
        if report.summary.pushed_model is None:
            assert cell != "yes"


def test_a_shifted_span_is_told_in_the_data_section_signal_by_signal(digits_facts, tmp_path):
    report = _shifted_span(digits_facts)
    page = read_page(write_report_files(report, tmp_path).html.read_text(encoding="utf-8"))

    headline = report.summary.span_shift["headline"]
    assert headline.startswith("span shift: 1 of 3 signals moved") and "brightness" in headline
    assert f"{headline}." in page.sentences["data"]
    moved = {row[0]: row[-1] for row in page.rows["data"] if len(row) == 7 and row[0] != "signal"}
    assert moved == {"brightness": "yes", "contrast": "no", "sharpness": "no"}
