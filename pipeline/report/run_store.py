"""Finds the newest run in a run folder's ML Metadata store, after the run finished.

`tpu-pipeline run` keeps one MLMD store per run folder. Every run of the
pipeline opens a `pipeline_run` context; the newest one is the run a report
describes, and its first execution id lets `RunRecord` read exactly that run.
"""

from __future__ import annotations

import dataclasses
import pathlib

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from tpu_pipeline.common.metadata_check import checked_connection
from tpu_pipeline.pipeline.results.run_record import RunRecord

METADATA_FILE = "metadata.sqlite"


class RunNotFoundError(FileNotFoundError):
    """The folder holds no pipeline run to report on."""


@dataclasses.dataclass
class StoredRun:
    """The newest run of a run folder: its record and its executions by node id."""

    run_dir: pathlib.Path
    pipeline_name: str
    run_id: str
    record: RunRecord
    executions: dict[str, metadata_store_pb2.Execution]
    node_ids: list[str]  # executed order first, then nodes this run never reached

    def first_output(self, node_id: str, key: str) -> metadata_store_pb2.Artifact | None:
        """The node's first output artifact under `key` in this run, if any."""
        outputs = self.record.node(node_id).outputs.get(key)
        return outputs[0] if outputs else None

    def seconds(self, node_id: str) -> float:
        """Wall time MLMD recorded for the node's execution in this run (0 if none)."""
        execution = self.executions.get(node_id)
        if execution is None:
            return 0.0
        return (execution.last_update_time_since_epoch - execution.create_time_since_epoch) / 1000


def open_latest_run(run_dir: pathlib.Path) -> StoredRun:
    """Opens the newest pipeline run recorded in `run_dir/metadata.sqlite`.

    Raises:
      RunNotFoundError: the folder has no metadata store or no run in it.
      DamagedMetadataError: the store is damaged.
    """
    run_dir = pathlib.Path(run_dir).resolve()
    path = run_dir / METADATA_FILE
    # Opening a missing SQLite store would create an empty one: check first.
    if not path.exists():
        raise RunNotFoundError(
            f"no pipeline run in {run_dir}: {METADATA_FILE} is missing; pass a run folder "
            "such as output/tpu-pipeline-digits, or run `tpu-pipeline run` first"
        )
    # Read-only: a report never changes the record the next run's caching relies on.
    connection = checked_connection(path, writable=False)
    store = metadata_store.MetadataStore(connection)
    pipelines = store.get_contexts_by_type("pipeline")
    runs = store.get_contexts_by_type("pipeline_run")
    if not pipelines or not runs:
        raise RunNotFoundError(f"no pipeline run recorded in {path}")
    pipeline_name = max(pipelines, key=lambda c: c.id).name
    run = max(runs, key=lambda c: c.id)
    run_executions = sorted(store.get_executions_by_context(run.id), key=lambda e: e.id)
    if not run_executions:
        raise RunNotFoundError(f"the newest run in {path} ({run.name}) executed nothing")

    prefix = f"{pipeline_name}."
    executions: dict[str, metadata_store_pb2.Execution] = {}
    for execution in run_executions:
        for context in store.get_contexts_by_execution(execution.id):
            if context.name.startswith(prefix) and context.type == "node":
                executions[context.name.removeprefix(prefix)] = execution
    known_nodes = [
        context.name.removeprefix(prefix)
        for context in sorted(store.get_contexts_by_type("node"), key=lambda c: c.id)
        if context.name.startswith(prefix)
    ]
    node_ids = list(executions) + [node for node in known_nodes if node not in executions]
    record = RunRecord(connection, pipeline_name, first_execution_id=run_executions[0].id)
    return StoredRun(run_dir, pipeline_name, run.name, record, executions, node_ids)
