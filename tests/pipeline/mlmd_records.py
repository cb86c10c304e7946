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
) -> metadata_store_pb2.Execution:
    """Records one execution of `node_id` in `state`, in its node context as the TFX runner
    does; returns it."""
    node_type = store.put_context_type(metadata_store_pb2.ContextType(name="node"))
    context = store.get_context_by_type_and_name("node", f"{PIPELINE}.{node_id}")
    if context is None:
        context = metadata_store_pb2.Context(type_id=node_type, name=f"{PIPELINE}.{node_id}")
        [context.id] = store.put_contexts([context])
    execution_type = store.put_execution_type(metadata_store_pb2.ExecutionType(name=node_id))
    execution = metadata_store_pb2.Execution(type_id=execution_type, last_known_state=state)
    [execution.id] = store.put_executions([execution])
    store.put_attributions_and_associations(
        [], [metadata_store_pb2.Association(context_id=context.id, execution_id=execution.id)]
    )
    return execution
