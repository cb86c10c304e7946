"""A fact TFX does not keep is noted on a node's execution in this run, and read back only there."""

from __future__ import annotations

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from pipeline.run_record import RunRecord

PIPELINE = "tpu-pipeline-digits"


def _connection(tmp_path) -> metadata_store_pb2.ConnectionConfig:
    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = str(tmp_path / "metadata.sqlite")
    config.sqlite.connection_mode = (
        metadata_store_pb2.SqliteMetadataSourceConfig.READWRITE_OPENCREATE
    )
    return config


def _execute(store: metadata_store.MetadataStore, node_id: str) -> int:
    """Records one complete execution of `node_id`, as the TFX runner does; returns its id."""
    node_type = store.put_context_type(metadata_store_pb2.ContextType(name="node"))
    context = store.get_context_by_type_and_name("node", f"{PIPELINE}.{node_id}")
    if context is None:
        context = metadata_store_pb2.Context(type_id=node_type, name=f"{PIPELINE}.{node_id}")
        [context.id] = store.put_contexts([context])
    execution_type = store.put_execution_type(metadata_store_pb2.ExecutionType(name=node_id))
    execution = metadata_store_pb2.Execution(
        type_id=execution_type, last_known_state=metadata_store_pb2.Execution.COMPLETE
    )
    [execution_id] = store.put_executions([execution])
    store.put_attributions_and_associations(
        [], [metadata_store_pb2.Association(context_id=context.id, execution_id=execution_id)]
    )
    return execution_id


def test_a_note_is_kept_on_this_runs_execution_and_not_seen_by_the_next_run(tmp_path):
    connection = _connection(tmp_path)
    store = metadata_store.MetadataStore(connection)
    first_run = RunRecord(connection, PIPELINE)
    _execute(store, "ImportSchemaGen")

    assert first_run.note("ImportSchemaGen", "schema_bootstrapped", "/schemas/new.pbtxt")
    assert not first_run.note("Trainer", "schema_bootstrapped", "x")  # it did not run

    assert first_run.noted("ImportSchemaGen", "schema_bootstrapped") == "/schemas/new.pbtxt"
    assert first_run.node("ImportSchemaGen").status == "executed"  # the state is kept
    next_run = RunRecord(connection, PIPELINE)
    _execute(store, "ImportSchemaGen")
    assert next_run.noted("ImportSchemaGen", "schema_bootstrapped") is None
