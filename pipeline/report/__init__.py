"""The run report: one self-contained HTML page plus its figures as PNG files.

`write_report` reads a run's real artifacts (ML Metadata, TFDV statistics and
anomalies, the Trainer's TensorBoard logs, TFMA results, the exported model),
draws the figures with matplotlib and writes `report.html` next to them.
Modules: run_store (find the run), *_facts and tensorboard_logs (read one
kind of artifact each), collect (assemble), plots (draw), html (render).
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # importing them loads TensorFlow; the CLI's --help must stay instant
    from common.config import PipelineConfig
    from pipeline.report.collect import RunReport
    from pipeline.run_summary import RunSummary

REPORT_DIR = "report"
REPORT_FILE = "report.html"


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
      output_dir: where the page and PNGs go; default `<run_dir>/report`,
        replaced by each new report.

    Raises:
      RunNotFoundError: no summary was given and the folder holds no run.
    """
    from pipeline.report.collect import collect_report

    report = collect_report(run_dir, summary, config)
    return write_report_files(
        report, pathlib.Path(output_dir or pathlib.Path(run_dir) / REPORT_DIR)
    )


def write_report_files(report: RunReport, output_dir: pathlib.Path) -> ReportFiles:
    """Draws the figures of a collected `RunReport` and writes them and the page to `output_dir`."""
    from pipeline.report import plots
    from pipeline.report.html import render_html

    output_dir.mkdir(parents=True, exist_ok=True)
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
    }
    pngs: dict[str, bytes] = {}
    paths: dict[str, pathlib.Path] = {}
    for name, figure in drawn.items():
        if figure is not None:
            paths[name] = output_dir / f"{name}.png"
            pngs[name] = plots.save_png(figure, paths[name])
    html_path = output_dir / REPORT_FILE
    html_path.write_text(render_html(report, pngs), encoding="utf-8")
    return ReportFiles(html_path, paths)
