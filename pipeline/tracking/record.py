"""What a finished run logs to a tracker, gathered from what the run already recorded.

The configuration comes through its own dump (`model_dump(mode="json")`, where a secret
field shows its host only); the metrics from the run summary; the per-epoch histories
from the Trainer's TensorBoard logs (the same files the report draws); the span, the
input fingerprint, the code version and the run's id from ML Metadata and the notes the
run left there (`pipeline/runs/history.py`). Nothing is measured again.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib.metadata
import json
import math
import os
import pathlib
import re
import subprocess
from typing import Any

from tpu_pipeline.common.config import REPO_ROOT, PipelineConfig
from tpu_pipeline.pipeline.report import REPORT_DIR, REPORT_FILE
from tpu_pipeline.pipeline.results.run_outcome import run_outcome
from tpu_pipeline.pipeline.results.run_summary import RunSummary
from tpu_pipeline.pipeline.runs.compare import flatten
from tpu_pipeline.pipeline.runs.history import RunEntry, RunFolderNotFoundError, read_history

# MLflow's limits (mlflow/utils/validation.py): longer values are cut, marked.
MAX_PARAM_LENGTH = 6000
MAX_TAG_LENGTH = 8000
# Per-epoch histories: the tracker's name, the TensorBoard split and scalar it comes from.
HISTORIES = (
    ("train.loss", "train", "loss"),
    ("train.accuracy", "train", "accuracy"),
    ("val.loss", "validation", "loss"),
    ("val.accuracy", "validation", "accuracy"),
    ("learning_rate", "train", "learning_rate"),
    ("throughput.examples_per_second", "train", "examples_per_second"),
    ("epoch_seconds", "train", "seconds"),
)
MODEL_ARTIFACT = "model"
_MIB = 1024 * 1024


@dataclasses.dataclass(frozen=True)
class PushedVersion:
    """A version this run pushed: its served folder and name, to log and register."""

    folder: str
    version: str


@dataclasses.dataclass
class TrackedRun:
    """One run as a tracker records it.

    `histories` are per-epoch values (step = epoch, from 1); `artifacts` are (local file or
    folder, folder in the tracker's run) pairs; `summary_json` is the run summary as
    `--summary-json` writes it.
    """

    name: str
    params: dict[str, str]
    metrics: dict[str, float]
    histories: dict[str, list[tuple[int, float]]]
    tags: dict[str, str]
    artifacts: list[tuple[str, str]]
    summary_json: str
    pushed: PushedVersion | None
    description: str


def metric_name(name: str) -> str:
    """`name` in the characters trackers take in a metric or param key (letters, digits,
    `_ - . / : ` and spaces); anything else becomes `_`."""
    return re.sub(r"[^\w\-./: ]", "_", name).strip() or "_"


def _text(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 12] + "... (cut)"


def params_of(config: PipelineConfig, summary: RunSummary) -> dict[str, str]:
    """The resolved configuration (dotted field names), the fields chosen from the data
    (`chosen.<field>`) and how the Trainer ran (`trained_with.<key>`), as text."""
    params = {
        metric_name(name): _text(value, MAX_PARAM_LENGTH)
        for name, value in flatten(config.model_dump(mode="json")).items()
    }
    for field, chosen in ((summary.chosen_defaults or {}).get("fields") or {}).items():
        params[metric_name(f"chosen.{field}")] = _text(chosen["value"], MAX_PARAM_LENGTH)
    for key, value in (summary.trainer or {}).items():
        if isinstance(value, (str, int, float, bool)) or value is None:
            params[metric_name(f"trained_with.{key}")] = _text(value, MAX_PARAM_LENGTH)
    return params


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


def metrics_of(summary: RunSummary) -> dict[str, float]:
    """The run's final figures: eval metrics overall, against the baseline, per class and per
    slice; calibration; the blessing (1 or 0); each component's time and peak memory; each
    served model's accuracy, size and latency."""
    found: dict[str, Any] = {}
    for name, value in summary.metrics.items():
        found[f"eval.{name}"] = value
    for name, value in (summary.baseline_metrics or {}).items():
        found[f"eval.baseline.{name}"] = value
    for c in summary.per_class_metrics:
        found[f"eval.class.{c.class_name}.precision"] = c.precision
        found[f"eval.class.{c.class_name}.recall"] = c.recall
    for s in summary.slices:
        found[f"eval.slice.{s.kind}.{s.value}.accuracy"] = s.accuracy
        found[f"eval.slice.{s.kind}.{s.value}.examples"] = s.examples
    if summary.calibration:
        found["eval.calibration_error"] = summary.calibration.expected_calibration_error
    found["blessed"] = summary.blessed
    found["succeeded"] = summary.succeeded
    for c in summary.components:
        found[f"component.{c.id}.seconds"] = c.seconds
        if c.peak_rss_bytes is not None:
            found[f"component.{c.id}.peak_rss_mib"] = c.peak_rss_bytes / _MIB
    if summary.peak_rss_bytes is not None:
        found["run.peak_rss_mib"] = summary.peak_rss_bytes / _MIB
    for v in summary.serving_variants:
        found[f"serving.{v['name']}.accuracy"] = v["accuracy"]
        found[f"serving.{v['name']}.size_kib"] = v["size_bytes"] / 1024
        found[f"serving.{v['name']}.latency_ms"] = v["latency_ms"]
    return {
        metric_name(name): number
        for name, value in found.items()
        if (number := _number(value)) is not None
    }


def histories_of(model_run_uri: str | None) -> dict[str, list[tuple[int, float]]]:
    """Per-epoch training and validation metrics, learning rate and throughput, from the
    Trainer's TensorBoard logs in `model_run_uri` (a folder or a gs:// URI; none without)."""
    if not model_run_uri:
        return {}
    from tpu_pipeline.pipeline.report.tensorboard_logs import epoch_scalars

    scalars = epoch_scalars(model_run_uri)
    histories = {}
    for name, split, scalar in HISTORIES:
        values = scalars.get(split, {}).get(scalar) or []
        points = [(epoch, v) for epoch, v in enumerate(values, start=1) if math.isfinite(v)]
        if points:
            histories[name] = points
    return histories


def git_commit(root: pathlib.Path = REPO_ROOT) -> str | None:
    """The commit the code was run from (`+dirty` with uncommitted changes), or None outside
    a git checkout."""
    if not (root / ".git").exists():
        return None
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+dirty" if dirty else "")


def _this_run(config: PipelineConfig, summary: RunSummary) -> RunEntry | None:
    """The run just finished as ML Metadata holds it; None if it never reached the store (the
    newest run there is then an older one)."""
    if not summary.components or all(c.status == "skipped" for c in summary.components):
        return None
    try:
        history = read_history(config.run_dir)
    except RunFolderNotFoundError:
        return None
    return history.runs[0] if history.runs else None


def tags_of(config: PipelineConfig, summary: RunSummary, run: RunEntry | None) -> dict[str, str]:
    """Which data and code the run used, and how it ended."""
    dataset = config.dataset
    tags: dict[str, Any] = {
        "dataset": dataset.name,
        "pipeline": config.full_pipeline_name,
        "run_folder": str(config.run_dir),
        "outcome": run_outcome(summary),
        "blessing_reason": summary.blessing_reason,
        "push": summary.push_note,
        "tpu_pipeline_version": _package_version(),
        "git_commit": git_commit(),
    }
    if run is not None:
        window = f" (window of {dataset.span_window})" if dataset.span_window > 1 else ""
        tags["spans"] = f"{run.span}{window}" if run.span is not None else None
        tags["pipeline_run_id"] = run.run_id
        tags["code_version"] = run.code_version
        inputs = run.inputs or {}
        tags["input_fingerprint"] = inputs.get("inputs")
        tags["data_fingerprint"] = inputs.get("data")
        tags["input_files"] = inputs.get("files")
    if summary.pushed_model:
        tags["pushed_version"] = os.path.basename(summary.pushed_model)
        tags["served_folder"] = summary.pushed_model
    if summary.error:
        tags["error"] = summary.error
    return {name: _text(value, MAX_TAG_LENGTH) for name, value in tags.items() if value is not None}


def _package_version() -> str | None:
    try:
        return importlib.metadata.version("tpu-pipeline")
    except importlib.metadata.PackageNotFoundError:
        return None


def artifacts_of(
    config: PipelineConfig, summary: RunSummary, report_dir: pathlib.Path | None = None
) -> list[tuple[str, str]]:
    """The report's page and figures (in `report_dir`, by default the run folder's report),
    and the pushed version's model card (JSON and page)."""
    found = []
    report_dir = report_dir or config.run_dir / REPORT_DIR
    if (report_dir / REPORT_FILE).is_file():
        pages = [report_dir / REPORT_FILE, *sorted(report_dir.glob("*.png"))]
        found += [(str(path), REPORT_DIR) for path in pages]
    if summary.model_card and pathlib.Path(summary.model_card).is_file():
        card = pathlib.Path(summary.model_card)
        found += [
            (str(path), "model_card")
            for path in (card, card.with_suffix(".html"))
            if path.is_file()
        ]
    return found


def describe(config: PipelineConfig, summary: RunSummary) -> str:
    """The run's description (Markdown): how it ended and where its report is."""
    lines = [f"**{run_outcome(summary)}**"]
    if summary.blessing_reason:
        lines.append(f"Blessing: {summary.blessing_reason}.")
    lines.append(f"Push: {summary.pushed_model or 'nothing'} ({summary.push_note}).")
    if summary.error:
        lines.append(f"Error: {summary.error}")
    lines.append(f"Run folder: `{config.run_dir}`; the report is logged under `{REPORT_DIR}/`.")
    return "\n\n".join(lines)


def tracked_run(
    config: PipelineConfig, summary: RunSummary, report_dir: pathlib.Path | None = None
) -> TrackedRun:
    """Everything `summary`'s run logs to a tracker; its report is in `report_dir` (default:
    the run folder's report)."""
    run = _this_run(config, summary)
    pushed = None
    new_version = summary.pushed_model and summary.push_note == "new version"
    if new_version and config.tracking.register_pushed_versions:
        if pathlib.Path(summary.pushed_model).is_dir():
            pushed = PushedVersion(summary.pushed_model, os.path.basename(summary.pushed_model))
    started = datetime.datetime.fromtimestamp(run.started) if run else datetime.datetime.now()
    return TrackedRun(
        name=f"{config.dataset.name} {started:%Y-%m-%d %H:%M:%S}",
        params=params_of(config, summary),
        metrics=metrics_of(summary),
        histories=histories_of(run.model_run_uri if run is not None else None),
        tags=tags_of(config, summary, run),
        artifacts=artifacts_of(config, summary, report_dir),
        summary_json=summary.to_json(),
        pushed=pushed,
        description=describe(config, summary),
    )
