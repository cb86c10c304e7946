"""The report's folder keeps what the user put there; an earlier report's files are replaced."""

from __future__ import annotations

import pytest

from tpu_pipeline.common.owned_paths import UserPathError
from tpu_pipeline.pipeline.report import write_report
from tpu_pipeline.pipeline.results.run_summary import RunSummary
from tpu_pipeline.pipeline.wiring.data_sources import DataSourceError


def _summary() -> RunSummary:
    error = DataSourceError("data folder /nowhere does not exist")
    return RunSummary.without_results("tpu-pipeline-digits", [], error, None)


def test_a_report_folder_written_before_markers_is_replaced_as_the_products(tmp_path):
    folder = tmp_path / "run" / "report"
    folder.mkdir(parents=True)
    (folder / "report.html").write_text("an earlier report")
    (folder / "components.png").write_bytes(b"an earlier figure")

    files = write_report(tmp_path / "run", _summary())

    assert "No component ran." in files.html.read_text(encoding="utf-8")


def test_a_file_the_user_put_in_the_report_folder_stays_through_new_reports(tmp_path):
    write_report(tmp_path / "run", _summary())
    notes = tmp_path / "run" / "report" / "notes.txt"
    notes.write_text("what we concluded")

    write_report(tmp_path / "run", _summary())

    assert notes.read_text() == "what we concluded"


def test_an_unmarked_report_folder_holding_other_files_is_refused(tmp_path):
    folder = tmp_path / "run" / "report"
    folder.mkdir(parents=True)
    (folder / "report.html").write_text("the user's page")
    (folder / "notes.txt").write_text("the user's notes")

    with pytest.raises(UserPathError, match="did not write"):
        write_report(tmp_path / "run", _summary())

    assert (folder / "report.html").read_text() == "the user's page"
