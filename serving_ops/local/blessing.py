"""A person blesses a model the Evaluator refused: recorded in ML Metadata, then served.

TFX's baseline resolver (`LatestBlessedModelStrategy`) takes the newest Model
that some ModelBlessing artifact in the pipeline's context marks `blessed=1`
for its id (`current_model_id`). So a manual blessing is exactly that: a new
ModelBlessing (the Evaluator's refused one stays, history is not rewritten),
with the reason and who gave it, the output of a `ManualBlessing` execution
whose input is the Model, plus the PushedModel it published. The next run's
Evaluator compares against this model, the one being served, and the run
summary and report say it was blessed by hand.

The model is published first (after the serving check the Pusher runs) and
recorded second: a blessing recorded for a model that never reached the serving
folder would move the baseline away from what is served. The steps are here;
their order, under the run lock and with an intent record that lets the next
command finish a blessing cut short, is `serving_ops/local/actions.py`'s `bless`.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import time
from collections.abc import Callable
from typing import Any

from ml_metadata import errors
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2
from tfx.utils import path_constants

from tpu_pipeline.common.config import PipelineConfig
from tpu_pipeline.common.metadata_check import checked_connection
from tpu_pipeline.components.serving.publish import (
    FINGERPRINT_FILE,
    PushResult,
    model_fingerprint,
    push_model_version,
)
from tpu_pipeline.components.serving.versions import ServingFolderError, push_refusal, serving_lock
from tpu_pipeline.serving_ops.local.folder import UNBOUNDED_WAIT, LockWait
from tpu_pipeline.serving_ops.protocol import operator_name

EXECUTION_TYPE = "ManualBlessing"
REASON_PROPERTY = "manual_blessing_reason"
BLESSED_BY_PROPERTY = "manual_blessed_by"
# What TFX's Evaluator writes into a blessing folder.
BLESSED_FILE = "BLESSED"


def trainer_model_dir(model: metadata_store_pb2.Artifact) -> str:
    """The SavedModel folder inside a Trainer's Model artifact (TFX's `Format-Serving`).

    TFX's `path_utils.serving_model_path` says the same, but imports TensorFlow (through
    `fileio`) to look for an estimator's export folder, which this Trainer never writes.
    """
    return os.path.join(model.uri, path_constants.SERVING_MODEL_DIR)


@dataclasses.dataclass(frozen=True)
class ManualBlessing:
    """A recorded manual blessing: which model, why, by whom, and where it serves."""

    model_id: int
    blessing_id: int
    reason: str
    blessed_by: str
    push: PushResult


def open_store(metadata_path: pathlib.Path) -> metadata_store.MetadataStore:
    """The run folder's ML Metadata store, for writing; never creates a missing one."""
    if not metadata_path.exists():  # opening a missing SQLite store would create it
        raise FileNotFoundError(
            f"{metadata_path}: no metadata store; bless a model of a run folder that has run"
        )
    return metadata_store.MetadataStore(checked_connection(metadata_path, writable=True))


def _int(artifact: metadata_store_pb2.Artifact, name: str) -> int | None:
    return (
        artifact.custom_properties[name].int_value if name in artifact.custom_properties else None
    )


def artifacts_of_type(
    store: metadata_store.MetadataStore, context_id: int, type_name: str
) -> list[metadata_store_pb2.Artifact]:
    """The context's artifacts of one type, whatever their state (none if no run made one)."""
    try:
        artifact_type = store.get_artifact_type(type_name)
    except errors.NotFoundError:
        return []
    return [a for a in store.get_artifacts_by_context(context_id) if a.type_id == artifact_type.id]


def blessings_of(
    store: metadata_store.MetadataStore, context_id: int, model_id: int
) -> list[metadata_store_pb2.Artifact]:
    """Every ModelBlessing in the pipeline context that says `blessed=1` for the model."""
    return [
        blessing
        for blessing in artifacts_of_type(store, context_id, "ModelBlessing")
        if _int(blessing, "current_model_id") == model_id and _int(blessing, "blessed") == 1
    ]


@dataclasses.dataclass(frozen=True)
class RecordedBlessing:
    """A manual blessing as ML Metadata holds it (what the run summary shows)."""

    reason: str
    blessed_by: str
    pushed_destination: str | None


def manual_blessing_of(
    store: metadata_store.MetadataStore, pipeline_name: str, model_id: int
) -> RecordedBlessing | None:
    """The newest manual blessing of the model, and where it pushed the model; or None."""
    context = store.get_context_by_type_and_name("pipeline", pipeline_name)
    if context is None:
        return None
    manual = [
        b
        for b in blessings_of(store, context.id, model_id)
        if REASON_PROPERTY in b.custom_properties
    ]
    if not manual:
        return None
    blessing = max(manual, key=lambda b: b.id)
    made_by = next(
        e
        for e in store.get_events_by_artifact_ids([blessing.id])
        if e.type == metadata_store_pb2.Event.OUTPUT
    )
    pushed = [
        store.get_artifacts_by_id([e.artifact_id])[0]
        for e in store.get_events_by_execution_ids([made_by.execution_id])
        if e.type == metadata_store_pb2.Event.OUTPUT and e.path.steps[0].key == "pushed_model"
    ]
    destination = pushed[0].custom_properties["pushed_destination"].string_value if pushed else None
    return RecordedBlessing(
        blessing.custom_properties[REASON_PROPERTY].string_value,
        blessing.custom_properties[BLESSED_BY_PROPERTY].string_value,
        destination,
    )


@dataclasses.dataclass(frozen=True)
class Candidate:
    """The Model a person blesses, with the store and pipeline context that hold it."""

    store: metadata_store.MetadataStore
    context: metadata_store_pb2.Context
    model: metadata_store_pb2.Artifact

    @property
    def model_dir(self) -> str:
        """The SavedModel folder the Trainer wrote (what is published)."""
        return trainer_model_dir(self.model)

    def is_blessed(self) -> bool:
        """Whether some blessing (the Evaluator's or a person's) says `blessed=1` for it."""
        return bool(blessings_of(self.store, self.context.id, self.model.id))


def candidate(
    metadata_path: pathlib.Path,
    pipeline_name: str,
    model_id: int | None = None,
    model_path: pathlib.Path | None = None,
) -> Candidate:
    """The pipeline's newest Model, the one with `model_id`, or the one at `model_path`.

    `model_path` is what the report and the run summary show: the model the Evaluator
    judged (`.../ServingPackager/served_model/<id>`, or `.../Trainer/model/<id>` with
    `serving.package` off), its `Format-Serving` or anything inside it, or
    a served copy of it (a version folder: the same SavedModel fingerprint); the run
    folder itself means its newest model.

    Raises:
      ServingFolderError: no such model.
      DamagedMetadataError, LockedMetadataError: the store cannot be read now.
    """
    store = open_store(metadata_path)
    context = store.get_context_by_type_and_name("pipeline", pipeline_name)
    models = artifacts_of_type(store, context.id, "Model") if context else []
    which = "trained model"
    if model_id is not None:
        models = [m for m in models if m.id == model_id]
        which = f"model {model_id}"
    run_dir = metadata_path.parent.resolve()
    if model_path is not None and model_path.resolve() != run_dir:
        held = [m for m in models if _holds(pathlib.Path(m.uri), model_path)]
        models = held or [m for m in models if _is_copy_of(m, model_path)]
        which = f"model at {model_path}"
    if not models:
        raise ServingFolderError(
            f"{metadata_path}: no {which} of pipeline {pipeline_name}{_hint(model_path, run_dir)}"
        )
    return Candidate(store, context, max(models, key=lambda m: m.id))


def _holds(model_uri: pathlib.Path, path: pathlib.Path) -> bool:
    """Whether `path` is the model's folder or inside it."""
    path = path.resolve()
    return path == model_uri.resolve() or model_uri.resolve() in path.parents


def _is_copy_of(model: metadata_store_pb2.Artifact, path: pathlib.Path) -> bool:
    """Whether `path` is a copy of the model's SavedModel, as a served version is."""
    original = trainer_model_dir(model)
    if not (path / FINGERPRINT_FILE).is_file() or not os.path.isfile(
        os.path.join(original, FINGERPRINT_FILE)
    ):
        return False
    return model_fingerprint(str(path)) == model_fingerprint(original)


def _hint(model_path: pathlib.Path | None, run_dir: pathlib.Path) -> str:
    """What to give instead of a path that names no model of this run folder."""
    if model_path is None:
        return ""
    if run_dir not in model_path.resolve().parents:
        return (
            f"; {model_path} is outside this run folder ({run_dir}): give the "
            "--config/--dataset/--output-dir its run was made with"
        )
    return (
        "; give the model folder the report shows (RUN/pipeline_root/ServingPackager/"
        "served_model/<id>), a served version's folder, the run folder (its newest model) or "
        "the model's ML Metadata id"
    )


def publish(
    chosen: Candidate,
    serving_dir: str,
    wait: LockWait = UNBOUNDED_WAIT,
    before_publish: Callable[[str], None] | None = None,
    after_publish: Callable[[PushResult], None] | None = None,
) -> PushResult:
    """Publishes the model in the serving folder, as the Pusher would (its refusals too).

    `before_publish(model_dir)` runs for a model not served yet (the serving check);
    `after_publish(push)` still under the serving lock (the model card), so no rollback
    moves the version meanwhile.

    Raises:
      ServingFolderError: a pin stands or the model was rolled back (restore it instead).
    """
    with serving_lock(serving_dir, "serving bless", wait.seconds, wait.on_wait):
        refusal = push_refusal(chosen.model_dir, serving_dir)
        if refusal:
            raise ServingFolderError(f"not blessed: {refusal}")
        push = push_model_version(chosen.model_dir, serving_dir, before_publish=before_publish)
        if after_publish is not None:
            after_publish(push)
        return push


def pusher_inputs(store: metadata_store.MetadataStore, model_id: int) -> dict[str, Any] | None:
    """The inputs of the newest Pusher given the model (its evaluation, the Evaluator's
    blessing, the statistics, the model), as TFX artifacts; None if no Pusher had it."""
    from tfx.types import artifact_utils

    used_by = [
        e.execution_id
        for e in store.get_events_by_artifact_ids([model_id])
        if e.type == metadata_store_pb2.Event.INPUT
    ]
    for execution_id in sorted(used_by, reverse=True):
        inputs: dict[str, metadata_store_pb2.Artifact] = {}
        for event in store.get_events_by_execution_ids([execution_id]):
            if event.type == metadata_store_pb2.Event.INPUT:
                (artifact,) = store.get_artifacts_by_id([event.artifact_id])
                inputs[event.path.steps[0].key] = artifact
        if "evaluation" in inputs and "model_blessing" in inputs:
            types = {
                t.id: t
                for t in store.get_artifact_types_by_id(list({a.type_id for a in inputs.values()}))
            }
            return {
                key: artifact_utils.deserialize_artifact(types[a.type_id], a)
                for key, a in inputs.items()
            }
    return None


def write_model_card(
    chosen: Candidate,
    reason: str,
    push: PushResult,
    config: PipelineConfig,
    serving_check: str | None,
) -> str | None:
    """Writes the model card of a version a person published, as the Pusher writes its
    own (`components/model_card/`), the blessing saying who gave it, why and what the
    Evaluator had said; None (no card) for a model no Pusher saw with its evaluation."""
    from tpu_pipeline.components.model_card import card, facts
    from tpu_pipeline.components.model_card.write import write_model_card as write

    inputs = pusher_inputs(chosen.store, chosen.model.id)
    if inputs is None:
        return None
    evaluation = inputs["evaluation"]
    found = facts.gather(
        model=inputs["model"],
        model_dir=chosen.model_dir,
        evaluation=evaluation,
        blessing=facts.manual_blessing(
            inputs["model_blessing"], evaluation.uri, config.dataset, operator_name(), reason
        ),
        blessing_artifact=inputs["model_blessing"],
        statistics=inputs.get("statistics"),
        dataset=config.dataset,
        slice_rule=config.evaluator,
        version=push.version,
        version_dir=push.version_dir,
        serving_check=serving_check,
    )
    return write(push.version_dir, card.model_card(found))


def record(
    chosen: Candidate, reason: str, push: PushResult, run_dir: pathlib.Path
) -> ManualBlessing:
    """Records the manual blessing of a published model in ML Metadata."""
    blessed_by = operator_name()
    blessing_id = _record(
        chosen.store, chosen.context, chosen.model, reason, blessed_by, push, run_dir
    )
    return ManualBlessing(chosen.model.id, blessing_id, reason, blessed_by, push)


def _record(
    store: metadata_store.MetadataStore,
    context: metadata_store_pb2.Context,
    model: metadata_store_pb2.Artifact,
    reason: str,
    blessed_by: str,
    push: PushResult,
    run_dir: pathlib.Path,
) -> int:
    """Writes the ManualBlessing execution, its ModelBlessing and PushedModel; the blessing's id."""
    folder = run_dir / "pipeline_root" / EXECUTION_TYPE / f"{time.time_ns()}"
    (folder / "blessing").mkdir(parents=True)
    (folder / "blessing" / BLESSED_FILE).touch()
    blessing = _artifact(store, "ModelBlessing", folder / "blessing")
    for name, value in {
        "blessed": 1,
        "current_model_id": model.id,
        "current_model": model.uri,
        REASON_PROPERTY: reason,
        BLESSED_BY_PROPERTY: blessed_by,
    }.items():
        _set(blessing, name, value)
    pushed = _artifact(store, "PushedModel", folder / "pushed_model")
    for name, value in {
        "pushed": 1,
        "pushed_destination": push.version_dir,
        "pushed_version": push.version,
    }.items():
        _set(pushed, name, value)
    execution_type = metadata_store_pb2.ExecutionType(name=EXECUTION_TYPE)
    execution = metadata_store_pb2.Execution(
        type_id=store.put_execution_type(execution_type),
        last_known_state=metadata_store_pb2.Execution.COMPLETE,
    )
    _set(execution, REASON_PROPERTY, reason)
    _set(execution, BLESSED_BY_PROPERTY, blessed_by)
    events = [
        (model, _event(metadata_store_pb2.Event.INPUT, "model")),
        (blessing, _event(metadata_store_pb2.Event.OUTPUT, "blessing")),
        (pushed, _event(metadata_store_pb2.Event.OUTPUT, "pushed_model")),
    ]
    _, artifact_ids, _ = store.put_execution(execution, events, [context])
    return artifact_ids[1]


def _artifact(
    store: metadata_store.MetadataStore, type_name: str, uri: pathlib.Path
) -> metadata_store_pb2.Artifact:
    return metadata_store_pb2.Artifact(
        type_id=store.get_artifact_type(type_name).id,
        uri=str(uri),
        state=metadata_store_pb2.Artifact.LIVE,  # the resolver reads LIVE artifacts only
    )


def _set(message, name: str, value: int | str) -> None:
    field = "int_value" if isinstance(value, int) else "string_value"
    setattr(message.custom_properties[name], field, value)


def _event(kind: int, key: str) -> metadata_store_pb2.Event:
    event = metadata_store_pb2.Event(type=kind)
    event.path.steps.add().key = key
    return event
