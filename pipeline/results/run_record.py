"""Reads what a run did back from ML Metadata: statuses, metrics, blessing, push.

MLMD is the record TFX itself keeps, so the summary a user sees is the same
truth the next run's caching and baseline resolution will use.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

# Noted on ImportSchemaGen's execution (`RunRecord.note`) when the run itself wrote the
# schema it imported: its path. The report then says the data was checked against a
# schema inferred from that same data, not against a reviewed one.
SCHEMA_BOOTSTRAPPED_PROPERTY = "schema_bootstrapped"

_STATUS_BY_STATE = {
    metadata_store_pb2.Execution.COMPLETE: "executed",
    metadata_store_pb2.Execution.CACHED: "cached",
}


@dataclasses.dataclass
class NodeRecord:
    """The newest execution of one pipeline node in this run, if it has one."""

    status: str  # executed | cached | failed | skipped
    outputs: dict[str, list[metadata_store_pb2.Artifact]]


class RunRecord:
    """Executions and artifacts of one run, told apart from earlier runs by execution id."""

    def __init__(
        self,
        connection_config: metadata_store_pb2.ConnectionConfig,
        pipeline_name: str,
        first_execution_id: int | None = None,
    ):
        """Reads the run that starts at `first_execution_id`.

        By default that is the run about to start: every execution recorded
        after this call. A finished run (e.g. for a report) passes its first id.
        """
        self._store = metadata_store.MetadataStore(connection_config)
        self._pipeline_name = pipeline_name
        if first_execution_id is None:
            executions = self._store.get_executions()
            first_execution_id = max((e.id for e in executions), default=0) + 1
        self._first_execution_id = first_execution_id

    @property
    def store(self) -> metadata_store.MetadataStore:
        """The run's ML Metadata store, for records no node made (a manual blessing)."""
        return self._store

    def _newest_execution(self, node_id: str) -> metadata_store_pb2.Execution | None:
        context = self._store.get_context_by_type_and_name(
            "node", f"{self._pipeline_name}.{node_id}"
        )
        executions = [
            e
            for e in (self._store.get_executions_by_context(context.id) if context else [])
            if e.id >= self._first_execution_id
        ]
        return max(executions, key=lambda e: e.id) if executions else None

    def node(self, node_id: str) -> NodeRecord:
        """Status and outputs of `node_id`'s newest execution in this run."""
        newest = self._newest_execution(node_id)
        if newest is None:
            return NodeRecord("skipped", {})
        return NodeRecord(
            _STATUS_BY_STATE.get(newest.last_known_state, "failed"), self._outputs(newest.id)
        )

    def _run_context(self, node_id: str) -> metadata_store_pb2.Context | None:
        """The `pipeline_run` context of the run `node_id` last executed in, if any."""
        newest = self._newest_execution(node_id)
        if newest is None:
            return None
        contexts = self._store.get_contexts_by_execution(newest.id)
        return next((c for c in contexts if c.type == "pipeline_run"), None)

    def run_id(self, node_id: str) -> str | None:
        """TFX's id (its `pipeline_run` context) of the run `node_id` last executed in, if any."""
        context = self._run_context(node_id)
        return context.name if context is not None else None

    def note(self, node_id: str, name: str, value: str) -> bool:
        """Records a fact about this run that TFX does not keep (e.g. that this run
        wrote the schema it imported) on the run's `pipeline_run` context.

        On the context, not on `node_id`'s execution: updating an execution moves the
        end time MLMD keeps for it, which a rebuilt report shows as its seconds.
        Returns False, recording nothing, when the node did not run in this run.
        """
        context = self._run_context(node_id)
        if context is None:
            return False
        context.custom_properties[name].string_value = value
        self._store.put_contexts([context])
        return True

    def noted(self, node_id: str, name: str) -> str | None:
        """What `note` recorded under `name` for the run `node_id` last executed in, if any."""
        context = self._run_context(node_id)
        return custom_property(context, name) if context is not None else None

    def _outputs(self, execution_id: int) -> dict[str, list[metadata_store_pb2.Artifact]]:
        events = [
            event
            for event in self._store.get_events_by_execution_ids([execution_id])
            if event.type
            in (metadata_store_pb2.Event.OUTPUT, metadata_store_pb2.Event.DECLARED_OUTPUT)
        ]
        artifacts = {
            a.id: a for a in self._store.get_artifacts_by_id([e.artifact_id for e in events])
        }
        outputs: dict[str, list[metadata_store_pb2.Artifact]] = {}
        for event in events:
            key = event.path.steps[0].key if event.path.steps else "output"
            outputs.setdefault(key, []).append(artifacts[event.artifact_id])
        return outputs


def custom_property(
    artifact: metadata_store_pb2.Artifact
    | metadata_store_pb2.Execution
    | metadata_store_pb2.Context,
    name: str,
) -> Any:
    """The int or string value of a custom property of an MLMD record, or None."""
    if name not in artifact.custom_properties:
        return None
    value = artifact.custom_properties[name]
    return getattr(value, value.WhichOneof("value"))
