"""The run report: one self-contained HTML page plus its figures as PNG files.

`write_report` reads a run's real artifacts (ML Metadata, TFDV statistics and
anomalies, the Trainer's TensorBoard logs, TFMA results, the exported model),
draws the figures with matplotlib and writes `report.html` next to them.
Modules: run_store (find the run), *_facts and tensorboard_logs (read one
kind of artifact each), collect (assemble), plots (draw), html (render).

The run folder's own report (`<run>/report/report.html`) is the newest run's; each is
also kept as `<run>/report/runs/<run id>.html`, so a report links to the run before it.
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # importing them loads TensorFlow; the CLI's --help must stay instant
    from tpu_pipeline.common.config import PipelineConfig
    from tpu_pipeline.pipeline.report.collect import RunReport
    from tpu_pipeline.pipeline.results.run_summary import RunSummary

REPORT_DIR = "report"
REPORT_FILE = "report.html"
FIGURES = (
    "components",
    "data",
    "training",
    "comparison",
    "confusion_matrix",
    "per_class",
    "slices",
    "calibration",
    "samples",
    "attributions",
    "history",
)


def _earlier_report(names: list[str]) -> bool:
    """Whether an unmarked report folder holds only what a report wrote (before markers)."""
    return set(names) <= {REPORT_FILE, *(f"{figure}.png" for figure in FIGURES)}


@dataclasses.dataclass
class ReportFiles:
    html: pathlib.Path
    figures: dict[str, pathlib.Path]


def write_report(
    run_dir: pathlib.Path,
    summary: RunSummary | None = None,
    config: PipelineConfig | None = None,
    output_dir: pathlib.Path | None = None,
) -> ReportFiles:
    """Writes the report of the newest run in `run_dir`; returns the files written.

    Args:
      run_dir: a run folder (`<output_dir>/<pipeline>-<dataset>`).
      summary: the summary of the run just finished, if any (see `collect_report`).
      config: the run's configuration, if known.
      output_dir: where the page and PNGs go; default `<run_dir>/report`. Either is
        new, empty or a report folder, never a folder of the user's files
        (`common/owned_paths.py`); each new report replaces the files of the last.

    Raises:
      RunNotFoundError: no summary was given and the folder holds no run.
      UserPathError: `output_dir` holds files the product did not write.
    """
    from tpu_pipeline.common.owned_paths import check_claimable
    from tpu_pipeline.pipeline.report.collect import collect_report

    if output_dir is not None:  # refused before the run is read
        check_claimable(output_dir, "--output")
    report = collect_report(run_dir, summary, config, REPORT_DIR)
    if output_dir is None:
        return write_report_files(
            report, pathlib.Path(run_dir) / REPORT_DIR, _earlier_report, keep_run_page=True
        )
    return write_report_files(report, pathlib.Path(output_dir))


def write_report_files(
    report: RunReport,
    output_dir: pathlib.Path,
    adopt: Callable[[list[str]], bool] | None = None,
    keep_run_page: bool = False,
) -> ReportFiles:
    """Draws the figures of a collected `RunReport` and writes them and the page to `output_dir`.

    `output_dir` is claimed as `tpu_pipeline.common.owned_paths.claim_folder` does (with `adopt`). With
    `keep_run_page` (the run folder's own report), the page is also kept as
    `output_dir/runs/<run id>.html` for the reports of later runs to link to.
    """
    from tpu_pipeline.common.owned_paths import claim_folder, write_owned
    from tpu_pipeline.pipeline.report import plots
    from tpu_pipeline.pipeline.report.history_facts import RUNS_DIR, page_name
    from tpu_pipeline.pipeline.report.html import render_html

    claim_folder(output_dir, "--output", adopt)
    evaluation = report.evaluation
    lower_bound = (
        next(
            (
                t.lower_bound
                for t in evaluation.thresholds
                if t.lower_bound is not None and t.slices is None
            ),
            None,
        )
        if evaluation
        else None
    )
    baseline = report.summary.baseline_metrics or {}
    data = report.data
    drawn = {
        "components": plots.component_times(report.summary.components),
        "data": plots.feature_histograms(data.splits, data.label_feature, report.class_names)
        if data
        else None,
        "training": plots.training_curves(report.training.scalars) if report.training else None,
        "comparison": plots.candidate_vs_baseline(
            report.summary.metrics.get("accuracy"), baseline.get("accuracy"), lower_bound
        ),
        "confusion_matrix": plots.confusion_matrix(evaluation.confusion_matrix, report.class_names)
        if evaluation
        else None,
        "per_class": plots.per_class_metrics(evaluation.per_class) if evaluation else None,
        "slices": plots.slice_accuracies(
            report.summary.slices,
            report.summary.metrics.get("accuracy"),
            report.summary.slice_margin,
        ),
        "calibration": plots.reliability_diagram(report.summary.calibration),
        "samples": plots.sample_predictions(report.samples, report.class_names),
        "attributions": plots.attribution_maps(report.attributions, report.class_names),
        "history": plots.accuracy_history(report.history.runs, report.history.current)
        if report.history
        else None,
    }
    pngs: dict[str, bytes] = {}
    paths: dict[str, pathlib.Path] = {}
    for name, figure in drawn.items():
        if figure is not None:
            paths[name] = output_dir / f"{name}.png"
            pngs[name] = plots.png_bytes(figure)
            write_owned(paths[name], pngs[name], "--output")
    html_path = output_dir / REPORT_FILE
    write_owned(html_path, render_html(report, pngs, output_dir).encode("utf-8"), "--output")
    if keep_run_page and report.run_id:
        kept = pathlib.Path(claim_folder(output_dir / RUNS_DIR, "--output"))
        page = render_html(report, pngs, kept).encode("utf-8")
        write_owned(kept / page_name(report.run_id), page, "--output")
    return ReportFiles(html_path, paths)
