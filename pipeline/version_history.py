"""What ML Metadata knows about each served version: its accuracy and who blessed it.

For `tpu-pipeline serving list`. A version is found by the PushedModel whose
`pushed_destination` ends in its name (the Pusher's, or a manual blessing's);
its blessing is the one that let it through, and its accuracy comes from the
Evaluator run that judged the same Model.
"""

from __future__ import annotations

import os
import pathlib

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from pipeline.evaluation_results import overall_metrics
from pipeline.manual_blessing import (
    BLESSED_BY_PROPERTY,
    REASON_PROPERTY,
    artifacts_of_type,
    open_store,
)

_OUTPUT, _INPUT = metadata_store_pb2.Event.OUTPUT, metadata_store_pb2.Event.INPUT


def version_facts(metadata_path: pathlib.Path, pipeline_name: str) -> dict[str, str]:
    """A short line per pushed version name: accuracy and blessing; {} without a store."""
    if not metadata_path.exists():
        return {}
    store = open_store(metadata_path)
    context = store.get_context_by_type_and_name("pipeline", pipeline_name)
    if context is None:
        return {}
    facts = {}
    for pushed in artifacts_of_type(store, context.id, "PushedModel"):
        destination = pushed.custom_properties.get("pushed_destination")
        if destination is None or not destination.string_value:
            continue
        blessing = _blessing_that_pushed(store, pushed.id)
        if blessing is not None:
            facts[os.path.basename(destination.string_value)] = _describe(store, blessing)
    return facts


def _linked(store: metadata_store.MetadataStore, execution_id: int, kind: int, key: str) -> list:
    ids = [
        e.artifact_id
        for e in store.get_events_by_execution_ids([execution_id])
        if e.type == kind and key in {step.key for step in e.path.steps}
    ]
    return store.get_artifacts_by_id(ids) if ids else []


def _producer(store: metadata_store.MetadataStore, artifact_id: int) -> int | None:
    events = store.get_events_by_artifact_ids([artifact_id])
    return next((e.execution_id for e in events if e.type == _OUTPUT), None)


def _blessing_that_pushed(
    store: metadata_store.MetadataStore, pushed_id: int
) -> metadata_store_pb2.Artifact | None:
    """The Pusher's input blessing, or the manual blessing made with the push."""
    execution_id = _producer(store, pushed_id)
    if execution_id is None:
        return None
    found = _linked(store, execution_id, _INPUT, "model_blessing") or _linked(
        store, execution_id, _OUTPUT, "blessing"
    )
    return found[0] if found else None


def _describe(store: metadata_store.MetadataStore, blessing: metadata_store_pb2.Artifact) -> str:
    properties = blessing.custom_properties
    if REASON_PROPERTY in properties:
        who = f"blessed by hand by {properties[BLESSED_BY_PROPERTY].string_value}: "
        blessed = who + properties[REASON_PROPERTY].string_value
    else:
        blessed = "blessed by the Evaluator"
    accuracy = _accuracy(store, properties["current_model_id"].int_value)
    return f"accuracy {accuracy:.4f}, {blessed}" if accuracy is not None else blessed


def _accuracy(store: metadata_store.MetadataStore, model_id: int) -> float | None:
    """Eval accuracy from the newest Evaluator run that took this Model as its candidate."""
    events = store.get_events_by_artifact_ids([model_id])
    for execution_id in sorted({e.execution_id for e in events if e.type == _INPUT}, reverse=True):
        evaluation = _linked(store, execution_id, _OUTPUT, "evaluation")
        candidate = _linked(store, execution_id, _INPUT, "model")
        if evaluation and [m.id for m in candidate] == [model_id]:
            return overall_metrics(evaluation[0].uri)[0].get("accuracy")
    return None
