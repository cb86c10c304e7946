"""The report's run history: the last runs' accuracy, and the previous run's own report.

Every report of a run folder's newest run is also kept as `report/runs/<run id>.html`
(one self-contained page per run), so a report can link to the one before it. The runs
themselves come from ML Metadata (`pipeline/runs/history.py`).
"""

from __future__ import annotations

import dataclasses
import pathlib
import re

from tpu_pipeline.pipeline.runs.history import RunEntry, RunFolderNotFoundError, read_history

# The folder of the run folder's report that keeps one page per run.
RUNS_DIR = "runs"
# Runs the accuracy chart shows, the newest last.
CHARTED_RUNS = 10


@dataclasses.dataclass
class HistoryFacts:
    """The reported run among the ones before it.

    `runs` are the last CHARTED_RUNS runs, newest first (the reported one included when it
    reached ML Metadata); `previous` is the run before the reported one, and
    `previous_report` its kept page, when there is one.
    """

    runs: list[RunEntry]
    current: RunEntry | None
    previous: RunEntry | None
    previous_report: pathlib.Path | None


def page_name(run_id: str) -> str:
    """The file a run's page is kept as: its id, with what a URL or a file name may not hold
    (`:`) turned into `-`."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", run_id) + ".html"


def kept_page(run_dir: pathlib.Path, report_dir_name: str, run_id: str) -> pathlib.Path:
    """Where the run folder's report keeps the page of run `run_id`."""
    return pathlib.Path(run_dir) / report_dir_name / RUNS_DIR / page_name(run_id)


def collect_history(
    run_dir: pathlib.Path, run_id: str | None, report_dir_name: str
) -> HistoryFacts | None:
    """The history around run `run_id` (None: a run that never reached ML Metadata, so the
    newest recorded run is the one before it); None without a store."""
    try:
        history = read_history(run_dir)
    except RunFolderNotFoundError:
        return None
    current = next((run for run in history.runs if run.run_id == run_id), None)
    if current is not None:
        previous = history.previous(current)
        shown = history.runs[current.number - 1 : current.number - 1 + CHARTED_RUNS]
    else:
        previous = history.runs[0] if history.runs else None
        shown = history.runs[:CHARTED_RUNS]
    page = kept_page(run_dir, report_dir_name, previous.run_id) if previous else None
    return HistoryFacts(shown, current, previous, page if page and page.is_file() else None)
