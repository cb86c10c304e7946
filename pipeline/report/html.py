"""Renders a `RunReport` as one self-contained HTML page (template: report.html.j2).

Figures are embedded as base64 PNGs and the page loads nothing else, so it can
be mailed, attached to a ticket or opened on a machine with no network.
Jinja2 escapes every value, so error messages and paths cannot break the page.
"""

from __future__ import annotations

import base64
import datetime
import json
import math
import os
import pathlib
from typing import Any

import jinja2
import markupsafe

from tpu_pipeline.components.evaluation.results import ClassMetrics, SliceMetrics
from tpu_pipeline.components.evaluation.verdict import NOT_JUDGED
from tpu_pipeline.components.explain.store import Attributions
from tpu_pipeline.components.training.hyperparameters import format_value
from tpu_pipeline.pipeline.report.collect import RunReport
from tpu_pipeline.pipeline.results.tuning_results import TuningResult
from tpu_pipeline.pipeline.wiring.node_ids import NodeIds

TEMPLATE = "report.html.j2"
# Per-epoch table: column title, split, TensorBoard metric, format.
EPOCH_COLUMNS = (
    ("loss", "train", "loss", "{:.4f}"),
    ("accuracy", "train", "accuracy", "{:.4f}"),
    ("val loss", "validation", "loss", "{:.4f}"),
    ("val accuracy", "validation", "accuracy", "{:.4f}"),
    ("learning rate", "train", "learning_rate", "{:.3g}"),
    ("seconds", "train", "seconds", "{:.2f}"),
    ("examples/s", "train", "examples_per_second", "{:.0f}"),
)


def _outcome_class(report: RunReport) -> str:
    summary = report.summary
    if summary.error or summary.data_rejected:
        return "bad"
    return "ok" if summary.blessed else "warn"


def number(value: float) -> str:
    """A statistic in 4 significant digits; blank where TFDV computes none (text, binary)."""
    return "" if math.isnan(value) else f"{value:.4g}"


def run_time(seconds: float) -> str:
    """When a run started, in local time."""
    return datetime.datetime.fromtimestamp(seconds).strftime("%Y-%m-%d %H:%M")


def byte_size(size: float) -> str:
    """A size in bytes as people read it: `64 B`, `1.8 KB`, `2.3 MB`."""
    if size < 1024:
        return f"{size:.0f} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / 1024 / 1024:.1f} MB"


def component_status(report: RunReport, node_id: str) -> str:
    """executed, cached, failed, interrupted, or skipped when the run never reached it."""
    return next((c.status for c in report.summary.components if c.id == node_id), "skipped")


def not_run_reason(report: RunReport, node_id: str, what: str) -> str:
    """Why a section has nothing: the component failed or was interrupted, or never ran."""
    status = component_status(report, node_id)
    if status in ("failed", "interrupted"):
        stopped = "was interrupted" if status == "interrupted" else "failed"
        return f"The {node_id} {stopped} (see the error above): ML Metadata holds no {what} of it."
    return f"The {node_id} did not run."


def epoch_rows(scalars: dict[str, dict[str, list[float]]]) -> list[list[str]]:
    """One row per epoch: the epoch number, then each EPOCH_COLUMNS value (blank if missing)."""
    epochs = len(scalars.get("train", {}).get("loss", []))
    rows = []
    for epoch in range(epochs):
        row = [str(epoch + 1)]
        for _, split, metric, fmt in EPOCH_COLUMNS:
            values = scalars.get(split, {}).get(metric, [])
            row.append(fmt.format(values[epoch]) if epoch < len(values) else "")
        rows.append(row)
    return rows


PER_CLASS_COLUMNS = ["class", "precision", "recall", "eval examples", "predicted as it"]


def per_class_rows(per_class: list[ClassMetrics]) -> list[list[str]]:
    """One row per class (PER_CLASS_COLUMNS): its name, precision, recall and counts.

    A precision or recall that is 0 of 0 says why instead of showing a number.
    """
    rows = []
    for c in per_class:
        precision = "undefined (never predicted)" if c.precision is None else f"{c.precision:.4f}"
        recall = "undefined (no example)" if c.recall is None else f"{c.recall:.4f}"
        rows.append([c.class_name, precision, recall, str(c.examples), str(c.predicted)])
    return rows


SLICE_COLUMNS = ["slice", "value", "eval examples", "accuracy", "flagged", "bound"]


def slice_rows(slices: list[SliceMetrics], min_examples: int | None) -> list[list[str]]:
    """One row per slice (SLICE_COLUMNS); a slice too small to be flagged, or to be held
    to its kind's bound, says so."""
    rows = []
    for s in slices:
        too_few = min_examples is not None and s.examples < min_examples
        flagged = "yes" if s.flagged else "too few examples to flag" if too_few else ""
        bound = ""
        if s.bound is not None:
            outcome = s.bound_outcome
            if outcome == NOT_JUDGED:
                outcome = "not judged: too few examples"
            bound = f"{s.bound:.4f}: {outcome}"
        rows.append([s.kind, s.value, str(s.examples), f"{s.accuracy:.4f}", flagged, bound])
    return rows


def trial_table(tuning: TuningResult | None) -> dict[str, list]:
    """Column titles and one row per trial: id, status, objective, seconds, then its values."""
    if tuning is None:
        return {"trial_columns": [], "trial_rows": []}
    names = sorted({name for trial in tuning.trials for name in trial.hyperparameters})
    rows = []
    for trial in tuning.trials:
        chosen = " (chosen)" if trial.trial_id == tuning.chosen_trial_id else ""
        rows.append(
            [
                trial.trial_id + chosen,
                trial.status,
                "" if trial.value is None else f"{trial.value:.4f}",
                f"{trial.seconds:.1f}",
                *(format_value(trial.hyperparameters.get(name, "")) for name in names),
            ]
        )
    return {
        "trial_columns": ["trial", "status", tuning.objective, "seconds", *names],
        "trial_rows": rows,
    }


def attribution_facts(attributions: Attributions | None) -> dict[str, Any]:
    """The attribution caption's method name, its phrase for the mistakes shown, and the
    number of right answers shown."""
    if attributions is None:
        return {"attribution_method": "", "attribution_mistakes_phrase": "", "attribution_right": 0}
    mistakes = sum(c.mistake for c in attributions.chosen)
    if mistakes == 0:
        phrase = "none of its answers was a mistake"
    elif mistakes < attributions.settings["mistakes"]:
        phrase = f"all {mistakes} of its mistakes"
    else:
        phrase = f"its {mistakes} most confident mistakes"
    name = attributions.method_name
    return {
        "attribution_method": name[:1].upper() + name[1:],
        "attribution_mistakes_phrase": phrase,
        "attribution_right": len(attributions.chosen) - mistakes,
    }


def previous_link(report: RunReport, page_dir: pathlib.Path | None) -> str | None:
    """The previous run's kept page, relative to the folder the page is written to."""
    history = report.history
    if history is None or history.previous_report is None:
        return None
    if page_dir is None:
        return history.previous_report.as_uri()
    return pathlib.Path(os.path.relpath(history.previous_report, page_dir)).as_posix()


# The sections the navigation bar links to, in the page's order; one shows only when present.
SECTION_LINKS = (
    ("history", "Run history"),
    ("data", "Data"),
    ("tuning", "Tuning"),
    ("training", "Training"),
    ("evaluation", "Evaluation"),
    ("attributions", "Why it decided"),
    ("deployment", "Deployment"),
    ("samples", "Sample predictions"),
    ("what-ran", "What ran"),
)


def glance(report: RunReport) -> dict[str, Any]:
    """The first screen: did the candidate get better than the baseline, how sure that is,
    and what serves now. Strings ready to show; None where the run has no such fact."""
    summary = report.summary
    candidate = summary.metrics.get("accuracy")
    baseline = (summary.baseline_metrics or {}).get("accuracy")
    comparison = summary.baseline_comparison
    if comparison is not None:
        how_sure = comparison.how_sure()
    elif baseline is None:
        how_sure = "no baseline yet: the first model of this folder"
    else:
        how_sure = "not compared on the same eval examples"
    pushed = summary.pushed_model
    if not report.serving_now:
        served = "Served now: nothing; no version in the run folder's serving_model."
    elif not pushed:
        served = f"Served now: version {report.serving_now}; this run pushed nothing."
    elif os.path.basename(pushed) == report.serving_now:
        served = f"Served now: version {report.serving_now}, pushed by this run."
    else:
        served = (
            f"Served now: version {report.serving_now}; the version this run pushed "
            f"({os.path.basename(pushed)}) was set aside since."
        )
    return {
        "candidate": None if candidate is None else f"{candidate:.4f}",
        "baseline": "none" if baseline is None else f"{baseline:.4f}",
        "change": "" if None in (candidate, baseline) else f"{candidate - baseline:+.4f}",
        "how_sure": how_sure,
        "served": served,
    }


def render_html(
    report: RunReport, figures: dict[str, bytes], page_dir: pathlib.Path | None = None
) -> str:
    """The report page, with `figures` (name -> PNG bytes) embedded where the template names them.

    `page_dir` is the folder the page is written to: the link to the previous run's page is
    relative to it (a file:// link without it).

    The template places: components, data, training, comparison,
    confusion_matrix, per_class, slices, calibration, attributions and samples; a missing
    figure is
    left out.
    """
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("tpu_pipeline.pipeline.report", ""),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    environment.filters.update(number=number, byte_size=byte_size)

    def figure(name: str) -> markupsafe.Markup:
        if name not in figures:
            return markupsafe.Markup("")
        data = base64.b64encode(figures[name]).decode("ascii")
        return markupsafe.Markup('<p><img alt="{}" src="data:image/png;base64,{}"></p>').format(
            name, data
        )

    per_class = report.evaluation.per_class if report.evaluation else []
    trainer_section = (report.config or {}).get("trainer") or {}
    return environment.get_template(TEMPLATE).render(
        r=report,
        previous_link=previous_link(report, page_dir),
        when=run_time,
        s=report.summary,
        outcome_class=_outcome_class(report),
        config_json=json.dumps(report.config, indent=2, sort_keys=True) if report.config else "",
        epoch_columns=["epoch"] + [column[0] for column in EPOCH_COLUMNS],
        epoch_rows=epoch_rows(report.training.scalars) if report.training else [],
        per_class_columns=PER_CLASS_COLUMNS,
        per_class_rows=per_class_rows(per_class),
        temperature_fit=report.summary.temperature_fit(),
        slice_columns=SLICE_COLUMNS,
        slice_rows=slice_rows(report.summary.slices, report.summary.slice_min_examples),
        **trial_table(report.summary.tuning),
        **attribution_facts(report.attributions),
        class_weight=trainer_section.get("class_weight"),
        trainer_status=component_status(report, NodeIds.TRAINER),
        not_run=lambda node_id, what: not_run_reason(report, node_id, what),
        figure=figure,
        glance=glance(report),
        section_links=[
            (anchor, title)
            for anchor, title in SECTION_LINKS
            if anchor != "tuning" or report.summary.tuning
        ],
    )
