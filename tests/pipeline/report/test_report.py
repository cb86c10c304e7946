"""The report of a real digits run shows the run's real numbers, figures and decisions."""

from __future__ import annotations

import base64
import dataclasses
import re
from html import escape as html_escape

import pytest
import tensorflow_model_analysis as tfma

from tpu_pipeline.components.evaluation.eval_config import ACCURACY_METRIC
from tpu_pipeline.components.preflight.memory import describe as describe_bytes
from tpu_pipeline.pipeline.report import write_report
from tpu_pipeline.pipeline.report.collect import collect_report
from tpu_pipeline.pipeline.report.run_store import open_latest_run

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
pytestmark = pytest.mark.slow  # every test reads the real digits pipeline run


@pytest.fixture(scope="module")
def digits_report(digits_run, tmp_path_factory):
    """The report rebuilt from the run folder alone, as `tpu-pipeline report RUN` does."""
    config, _ = digits_run
    files = write_report(config.run_dir, output_dir=tmp_path_factory.mktemp("report"))
    return files, files.html.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def digits_facts(digits_run):
    config, summary = digits_run
    return collect_report(config.run_dir, summary, config)


def _tfma_accuracy(config) -> float:
    evaluation = open_latest_run(config.run_dir).first_output("Evaluator", "evaluation")
    for metrics in tfma.load_metrics(evaluation.uri):
        if metrics.slice_key.single_slice_keys:  # a class's slice, not the whole split
            continue
        for entry in metrics.metric_keys_and_values:
            if entry.key.name == ACCURACY_METRIC and not entry.key.HasField("sub_key"):
                return entry.value.double_value.value
    raise AssertionError("TFMA wrote no accuracy")


def test_report_shows_the_accuracy_tfma_computed(digits_run, digits_report):
    config, summary = digits_run
    _, html = digits_report
    accuracy = _tfma_accuracy(config)
    assert accuracy == pytest.approx(summary.metrics["accuracy"])
    shown = re.search(r'id="metric-accuracy">([0-9.]+)<', html).group(1)
    assert shown == f"{accuracy:.4f}"


def test_report_rebuilt_from_the_run_folder_agrees_with_the_run_summary(digits_run):
    config, summary = digits_run
    rebuilt = collect_report(config.run_dir).summary
    assert rebuilt.metrics == summary.metrics
    assert (rebuilt.blessed, rebuilt.pushed_model) == (summary.blessed, summary.pushed_model)
    # The slices, flagged by the margin the run noted in ML Metadata.
    assert rebuilt.slices == summary.slices
    assert (rebuilt.slice_margin, rebuilt.slice_min_examples) == (0.1, 20)
    assert [(c.id, c.status) for c in rebuilt.components] == [
        (c.id, c.status) for c in summary.components
    ]
    # Peak memory, from the run folder's memory file: the figures the run itself printed.
    assert [c.memory_peak() for c in rebuilt.components] == [
        c.memory_peak() for c in summary.components
    ]


def test_report_writes_every_figure_as_a_png_and_embeds_it(digits_report):
    files, html = digits_report
    expected = {
        "components",
        "data",
        "training",
        "comparison",
        "confusion_matrix",
        "per_class",
        "slices",
        "calibration",
    }
    assert expected | {"samples", "attributions"} == set(files.figures)
    for path in files.figures.values():
        data = path.read_bytes()
        assert data.startswith(PNG_MAGIC)
        assert base64.b64encode(data).decode("ascii") in html


def test_report_page_loads_nothing_from_the_network(digits_report):
    _, html = digits_report
    assert not re.search(r'(src|href)="(https?:)?//', html)
    assert "<script" not in html


def test_report_names_the_trainer_device_and_the_blessing(digits_run, digits_report):
    _, summary = digits_run
    _, html = digits_report
    assert summary.trainer["strategy"] in html
    assert "blessed: passed every threshold" in html
    assert f"Pushed: {summary.pushed_model}" in html
    assert "at least 0.9000" in html  # the accuracy threshold, in words


def test_report_names_the_model_by_its_ml_metadata_id_and_folder(digits_run, digits_report):
    config, _ = digits_run
    _, html = digits_report
    stored = open_latest_run(config.run_dir)
    # The model the Evaluator judged: the ServingPackager's, made from the Trainer's.
    model = stored.first_output("ServingPackager", "served_model")
    shown = f'<p id="model">Model {model.id} in ML Metadata: <code>{html_escape(model.uri)}</code>'
    assert shown in html  # what `serving bless` takes: the id or the folder
    assert f"Model {stored.first_output('Trainer', 'model').id} in ML Metadata" not in html


def test_report_lists_every_served_model_with_its_figures(digits_run, digits_report):
    _, summary = digits_run
    _, html = digits_report
    table = html[html.index('id="variants"') :]
    for variant in summary.serving_variants:
        assert f"<td>{variant['name']}</td>" in table
        assert f"{variant['accuracy']:.4f}" in table
        assert (variant["path"] or html_escape(variant["reason"])) in table


def test_confusion_matrix_counts_every_eval_example_and_matches_accuracy(digits_run, digits_facts):
    _, summary = digits_run
    matrix = digits_facts.evaluation.confusion_matrix
    eval_split = next(s for s in digits_facts.data.splits if s.name == "eval")
    assert matrix.sum() == summary.metrics["example_count"] == eval_split.examples
    assert matrix.trace() / matrix.sum() == pytest.approx(summary.metrics["accuracy"])
    three = digits_facts.evaluation.per_class[3]
    assert three.class_name == "3"  # digits has no label_names: classes are their values
    assert three.recall == pytest.approx(matrix[3, 3] / matrix[3].sum())
    assert three.precision == pytest.approx(matrix[3, 3] / matrix[:, 3].sum())


def test_sample_predictions_come_from_the_served_model_and_agree_with_tfma(digits_facts):
    samples = digits_facts.samples
    matrix = digits_facts.evaluation.confusion_matrix
    # The whole eval split was predicted through serving_default: same mistakes as TFMA's.
    assert samples.examined == matrix.sum()
    assert samples.mistakes == matrix.sum() - matrix.trace()
    shown_mistakes = int((samples.predicted != samples.true_labels).sum())
    assert shown_mistakes == min(samples.mistakes, len(samples.images) // 2)
    signatures = digits_facts.deployment.signatures
    assert signatures["serving_default"]["inputs"] == {"examples": "string [None]"}
    assert signatures["images"]["inputs"] == {"images": "string [None]"}
    assert signatures["pixels"]["inputs"] == {"pixels": "float32 [None, 8, 8, 1]"}
    for signature in signatures.values():
        assert signature["outputs"] == {"probabilities": "float32 [None, 10]"}


def test_training_section_has_one_row_per_epoch_with_throughput(digits_run, digits_facts):
    config, _ = digits_run
    train = digits_facts.training.scalars["train"]
    validation = digits_facts.training.scalars["validation"]
    assert len(train["loss"]) == len(validation["accuracy"]) == config.trainer.epochs
    assert all(rate > 0 for rate in train["examples_per_second"])
    assert train["learning_rate"][0] == pytest.approx(config.trainer.learning_rate)
    assert digits_facts.training.tensorboard_command.startswith("tensorboard --logdir ")


def test_report_shows_every_components_peak_memory_and_the_runs(digits_run, digits_report):
    _, summary = digits_run
    _, html = digits_report
    table = html[
        html.index('id="components"') : html.index("</table>", html.index('id="components"'))
    ]
    for component in summary.components:
        assert component.peak_rss_bytes > 0
        assert f"<td>{html_escape(component.describe_memory())}</td>" in table
    assert "not measured" not in table
    peak = max(c.peak_rss_bytes for c in summary.components)
    shown = re.search(
        r'id="peak-memory">Peak memory of the run: peak (&gt;=)?([0-9.]+ [GMK]iB) in (\w+)', html
    )
    assert shown.group(2) == describe_bytes(peak)
    assert shown.group(3) == next(c.id for c in summary.components if c.peak_rss_bytes == peak)


def test_the_calibration_section_gives_the_error_the_summary_holds(digits_report, digits_run):
    _, html = digits_report
    _, summary = digits_run
    error = summary.calibration.expected_calibration_error
    assert f'<b id="ece">{error:.4f}</b> on {summary.calibration.examples} eval examples' in html


def _first_screen(html: str) -> str:
    """What the page shows above its first section."""
    return html[html.index("<body>") : html.index("<h2 ")]


def _cell(html: str, cell_id: str) -> str:
    return re.search(rf'id="{cell_id}">([^<]*)<', html).group(1)


def test_the_first_screen_answers_did_it_get_better_and_is_it_served(digits_run, digits_report):
    config, summary = digits_run
    files, html = digits_report
    top = _first_screen(html)
    assert _cell(top, "glance-candidate") == f"{summary.metrics['accuracy']:.4f}"
    assert _cell(top, "glance-baseline") == "none"  # the folder's first model
    assert _cell(top, "glance-how-sure") == "no baseline yet: the first model of this folder"
    assert "Thresholds: accuracy: at least 0.9000." in top
    assert f"Verdict: blessed: {html_escape(summary.blessing_reason, quote=False)}." in top
    version = summary.pushed_model.rsplit("/", 1)[1]
    assert f"Served now: version {version}, pushed by this run." in top
    # Then a bar linking to every section, in the page's order; the memory table comes last.
    sections = re.findall(r'<h2 id="([^"]+)"', html)
    assert re.findall(r'<a href="#([^"]+)"', top) == sections
    assert sections[-1] == "what-ran"
    assert html.index('id="components"') > html.index('<h2 id="evaluation"')


def test_the_first_screen_gives_the_change_and_how_sure_it_is_against_a_baseline(digits_facts):
    from tpu_pipeline.components.evaluation.baseline_test import compare_with_baseline
    from tpu_pipeline.pipeline.report.html import render_html

    comparison = compare_with_baseline(9, 1, 347, allowed_drop=0.0, confidence=0.95)
    summary = dataclasses.replace(
        digits_facts.summary, baseline_metrics={"accuracy": 0.97}, baseline_comparison=comparison
    )
    top = _first_screen(render_html(dataclasses.replace(digits_facts, summary=summary), {}))
    candidate = summary.metrics["accuracy"]
    assert _cell(top, "glance-baseline") == "0.9700"
    assert _cell(top, "glance-change") == f"{candidate - 0.97:+.4f}"
    assert _cell(top, "glance-how-sure") == (
        f"significantly better at 95% confidence (McNemar p = {comparison.p_value_better:.2g})"
    )
    assert comparison.p_value_better < 0.05
