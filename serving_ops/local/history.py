"""What ML Metadata knows about each served version: its accuracy and who blessed it.

For `tpu-pipeline serving list`. A version is found by the PushedModel whose
`pushed_destination` ends in its name (the Pusher's, or a manual blessing's);
its blessing is the one that let it through, and names the Model's ML Metadata
id (what `serving bless` takes). Its accuracy is the one the version's own
folder carries (`tflite/measurements.json`: the SavedModel on the whole eval
split, measured at export): reading it needs neither TensorFlow nor TFMA, so
the command answers in about a second.
"""

from __future__ import annotations

import os
import pathlib

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from tpu_pipeline.components.serving.measurements import saved_model_accuracy
from tpu_pipeline.serving_ops.local.blessing import (
    BLESSED_BY_PROPERTY,
    REASON_PROPERTY,
    artifacts_of_type,
    open_store,
)
from tpu_pipeline.serving_ops.local.folder import Version

_OUTPUT, _INPUT = metadata_store_pb2.Event.OUTPUT, metadata_store_pb2.Event.INPUT


def version_facts(
    metadata_path: pathlib.Path, pipeline_name: str, versions: list[Version]
) -> dict[str, str]:
    """A short line per version name: accuracy, blessing and model id; {} without a store."""
    if not metadata_path.exists():
        return {}
    store = open_store(metadata_path)
    context = store.get_context_by_type_and_name("pipeline", pipeline_name)
    if context is None:
        return {}
    where = {version.version: version.path for version in versions}
    facts = {}
    for pushed in artifacts_of_type(store, context.id, "PushedModel"):
        destination = pushed.custom_properties.get("pushed_destination")
        if destination is None or not destination.string_value:
            continue
        name = os.path.basename(destination.string_value)
        blessing = _blessing_that_pushed(store, pushed.id)
        if blessing is not None and name in where:
            facts[name] = _describe(blessing, saved_model_accuracy(where[name]))
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


def _describe(blessing: metadata_store_pb2.Artifact, accuracy: float | None) -> str:
    properties = blessing.custom_properties
    if REASON_PROPERTY in properties:
        who = f"blessed by hand by {properties[BLESSED_BY_PROPERTY].string_value}: "
        blessed = who + properties[REASON_PROPERTY].string_value
    else:
        blessed = "blessed by the Evaluator"
    shown = f"accuracy {accuracy:.4f}, {blessed}" if accuracy is not None else blessed
    return f"{shown}; model {properties['current_model_id'].int_value} in ML Metadata"
