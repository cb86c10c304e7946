"""A run that was rejected or failed still gets a report, and it says why."""

from __future__ import annotations

import pytest
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from tests.pipeline.mlmd_records import PIPELINE, record_execution, sqlite_connection
from tpu_pipeline.cli.main import EXIT_DATA_REJECTED, main
from tpu_pipeline.pipeline.report import write_report
from tpu_pipeline.pipeline.report.collect import describe_outcome, summarize_stored_run
from tpu_pipeline.pipeline.report.run_store import StoredRun
from tpu_pipeline.pipeline.results.run_record import RunRecord
from tpu_pipeline.pipeline.results.run_summary import RunSummary
from tpu_pipeline.pipeline.wiring.data_sources import DataSourceError


@pytest.mark.slow
def test_a_rejected_run_gets_a_report_naming_the_anomaly(rejected_run):
    code, run_dir = rejected_run
    assert code == EXIT_DATA_REJECTED
    html = (run_dir / "report" / "report.html").read_text(encoding="utf-8")
    assert "Data rejected" in html
    assert "pixels: Out-of-range values" in html
    assert "The Trainer did not run." in html
    assert "Pushed: nothing" in html


@pytest.mark.slow
def test_report_of_a_rejected_run_rebuilt_later_says_why(rejected_run, tmp_path, capsys):
    _, run_dir = rejected_run
    assert main(["report", str(run_dir), "--output", str(tmp_path)]) == 0
    assert str(tmp_path / "report.html") in capsys.readouterr().out
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "Data rejected" in html
    assert "DataGate</td><td>failed" in html
    assert "pixels: Out-of-range values" in html


def test_a_run_that_failed_before_any_component_gets_a_report_with_the_error(tmp_path):
    error = DataSourceError("data folder /nowhere does not exist")
    summary = RunSummary.without_results("tpu-pipeline-digits", [], error, None)
    files = write_report(tmp_path / "run", summary)
    html = files.html.read_text(encoding="utf-8")
    assert (
        "Data rejected, so nothing was trained or pushed: "
        "DataSourceError: data folder /nowhere does not exist" in html
    )
    assert "No component ran." in html
    assert files.figures == {}


def test_report_of_a_folder_without_a_run_says_what_to_pass(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2  # a missing run, as for every command
    error = capsys.readouterr().err
    assert "metadata.sqlite is missing" in error
    assert not (tmp_path / "metadata.sqlite").exists()


def test_a_run_stopped_mid_trainer_is_reported_interrupted_when_rebuilt(tmp_path):
    connection = sqlite_connection(tmp_path)
    store = metadata_store.MetadataStore(connection)
    executions = {
        "ExampleGen": record_execution(store, "ExampleGen"),
        # A stop leaves the execution running: TFX marks only exceptions as failed.
        "Trainer": record_execution(store, "Trainer", metadata_store_pb2.Execution.RUNNING),
    }
    record = RunRecord(connection, PIPELINE, first_execution_id=1)
    stored = StoredRun(tmp_path, PIPELINE, "run-1", record, executions, [*executions, "Pusher"])

    summary = summarize_stored_run(stored, [])

    statuses = [c.status for c in summary.components]
    assert statuses == ["executed", "interrupted", "skipped"]
    assert summary.interrupted == "a signal or kill during Trainer" and not summary.succeeded
    assert describe_outcome(summary).startswith(
        "Interrupted by a signal or kill during Trainer: the run stopped and nothing was pushed"
    )
