"""ML Metadata records as the TFX runner writes them, for tests that need a few without a run."""

from __future__ import annotations

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

PIPELINE = "tpu-pipeline-digits"


def sqlite_connection(tmp_path) -> metadata_store_pb2.ConnectionConfig:
    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = str(tmp_path / "metadata.sqlite")
    config.sqlite.connection_mode = (
        metadata_store_pb2.SqliteMetadataSourceConfig.READWRITE_OPENCREATE
    )
    return config


def record_execution(
    store: metadata_store.MetadataStore,
    node_id: str,
    state: metadata_store_pb2.Execution.State = metadata_store_pb2.Execution.COMPLETE,
    run: str = "run-1",
) -> metadata_store_pb2.Execution:
    """Records one execution of `node_id` in `state`, in its node context and in the
    `pipeline_run` context named `run`, as the TFX runner does; returns it."""
    node_type = store.put_context_type(metadata_store_pb2.ContextType(name="node"))
    context = store.get_context_by_type_and_name("node", f"{PIPELINE}.{node_id}")
    if context is None:
        context = metadata_store_pb2.Context(type_id=node_type, name=f"{PIPELINE}.{node_id}")
        [context.id] = store.put_contexts([context])
    execution_type = store.put_execution_type(metadata_store_pb2.ExecutionType(name=node_id))
    execution = metadata_store_pb2.Execution(type_id=execution_type, last_known_state=state)
    [execution.id] = store.put_executions([execution])
    run_type = store.put_context_type(metadata_store_pb2.ContextType(name="pipeline_run"))
    run_context = store.get_context_by_type_and_name("pipeline_run", run)
    if run_context is None:
        run_context = metadata_store_pb2.Context(type_id=run_type, name=run)
        [run_context.id] = store.put_contexts([run_context])
    store.put_attributions_and_associations(
        [],
        [
            metadata_store_pb2.Association(context_id=c.id, execution_id=execution.id)
            for c in (context, run_context)
        ],
    )
    return execution
