"""A fact TFX does not keep is noted on this run's context, read back only for this run, and
leaves the execution's recorded times as they were."""

from __future__ import annotations

from ml_metadata.metadata_store import metadata_store

from tests.pipeline.mlmd_records import PIPELINE, record_execution, sqlite_connection
from tpu_pipeline.pipeline.results.run_record import RunRecord


def test_a_note_is_kept_on_this_runs_execution_and_not_seen_by_the_next_run(tmp_path):
    connection = sqlite_connection(tmp_path)
    store = metadata_store.MetadataStore(connection)
    first_run = RunRecord(connection, PIPELINE)
    executed = record_execution(store, "ImportSchemaGen", run="run-1")
    [before] = store.get_executions_by_id([executed.id])

    assert first_run.note("ImportSchemaGen", "schema_bootstrapped", "/schemas/new.pbtxt")
    assert not first_run.note("Trainer", "schema_bootstrapped", "x")  # it did not run

    assert first_run.noted("ImportSchemaGen", "schema_bootstrapped") == "/schemas/new.pbtxt"
    assert first_run.node("ImportSchemaGen").status == "executed"  # the state is kept
    [after] = store.get_executions_by_id([executed.id])
    # The report's seconds for a node come from these two times.
    assert after.last_update_time_since_epoch == before.last_update_time_since_epoch
    next_run = RunRecord(connection, PIPELINE)
    record_execution(store, "ImportSchemaGen", run="run-2")
    assert next_run.noted("ImportSchemaGen", "schema_bootstrapped") is None
