"""Every run of a run folder, newest first, from its ML Metadata store alone.

ML Metadata records what TFX did: the `pipeline_run` context of each run, its
executions (executed or cached), the span ExampleGen read, the Model the Trainer
made and the version the Pusher published. What only the run knows at its end, it
notes on its own `pipeline_run` context (`note_run`): its configuration (through
the configuration's own dump, so a secret shows its host only), its summary (metrics,
blessing and why, push) and the fingerprint of its inputs. A run made before these
notes is listed with what ML Metadata holds.

Reading imports ML Metadata and the standard library only: no TensorFlow, TFX or
TFMA, so `tpu-pipeline runs` answers in well under a second.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import pathlib
import types
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from tpu_pipeline.common.metadata_check import checked_connection
from tpu_pipeline.pipeline.results.run_outcome import FAILED, run_outcome
from tpu_pipeline.pipeline.wiring.node_ids import NodeIds

if TYPE_CHECKING:
    from tpu_pipeline.common.config import PipelineConfig
    from tpu_pipeline.pipeline.results.run_record import RunRecord
    from tpu_pipeline.pipeline.results.run_summary import RunSummary
    from tpu_pipeline.pipeline.wiring.input_fingerprint import InputFingerprint

METADATA_FILE = "metadata.sqlite"
SERVING_DIR = "serving_model"
# Noted on each run's `pipeline_run` context by `note_run`.
RUN_CONFIG_PROPERTY = "run_config"
RUN_SUMMARY_PROPERTY = "run_summary"
RUN_INPUTS_PROPERTY = "run_inputs"
# The custom_config key of the code's fingerprint (components/contract.py's CODE_VERSION_KEY;
# importing that module would import the configuration's whole package for one name).
CODE_VERSION_KEY = "code_version"
# The Pusher's PushedModel properties (components/pusher.py, which imports TensorFlow).
PUSHED_DESTINATION = "pushed_destination"
ALREADY_PUSHED = "already_pushed"
# A blessing given by hand after the run (pipeline/manual_blessing.py, which imports the
# configuration's whole package): why, and who.
MANUAL_REASON = "manual_blessing_reason"
MANUAL_BLESSED_BY = "manual_blessed_by"

_STATUS = {
    metadata_store_pb2.Execution.COMPLETE: "executed",
    metadata_store_pb2.Execution.CACHED: "cached",
    metadata_store_pb2.Execution.FAILED: "failed",
    metadata_store_pb2.Execution.CANCELED: "failed",
    metadata_store_pb2.Execution.RUNNING: "interrupted",
    metadata_store_pb2.Execution.NEW: "interrupted",
}
_OUTPUTS = (metadata_store_pb2.Event.OUTPUT, metadata_store_pb2.Event.DECLARED_OUTPUT)


class RunFolderNotFoundError(FileNotFoundError):
    """The folder holds no ML Metadata store, so no run to list."""


def note_run(
    record: RunRecord,
    node_ids: Sequence[str],
    config: PipelineConfig,
    summary: RunSummary,
    inputs: InputFingerprint | None,
) -> bool:
    """Notes the run's configuration, summary and inputs on its `pipeline_run` context.

    `node_ids` are the pipeline's nodes in order; the first that ran in this run finds
    the context. Returns False, noting nothing, when no node reached ML Metadata.
    """
    node = next((node for node in node_ids if record.run_id(node) is not None), None)
    if node is None:
        return False
    notes = {
        RUN_CONFIG_PROPERTY: config.model_dump_json(),  # secret fields dump as their host
        RUN_SUMMARY_PROPERTY: summary.to_json(),
    }
    if inputs is not None:
        notes[RUN_INPUTS_PROPERTY] = json.dumps(
            {
                "inputs": inputs.digest(),
                "data": inputs.data_digest(),
                "files": len(inputs.files),
                "data_root": inputs.data_root,
            }
        )
    for name, value in notes.items():
        record.note(node, name, value)
    return True


@dataclasses.dataclass(frozen=True)
class ServedVersion:
    """A version of the serving folder and when it was served.

    `until` is when the next version was pushed over it, or when it was set aside
    (`why_until` says which); None while it still serves.
    """

    version: str
    path: str
    pushed_at: float  # seconds since the epoch
    until: float | None
    why_until: str  # "a newer push", "rollback", "pin", ... or "" while served


@dataclasses.dataclass
class RunEntry:
    """One run as `runs` lists it; None where the run did not get that far or noted nothing."""

    number: int  # 1 is the newest
    run_id: str  # TFX's pipeline_run context name
    started: float  # seconds since the epoch
    finished: float
    statuses: dict[str, str]  # node id -> executed | cached | failed | interrupted
    config: dict[str, Any] | None  # the resolved configuration as the run noted it
    config_is_partial: bool  # only the Trainer's dataset and trainer sections (older runs)
    summary: dict[str, Any] | None  # the run summary as the run noted it
    inputs: dict[str, Any] | None  # digests of the inputs: "inputs", "data", "files"
    span: int | None
    model_id: int | None
    model_uri: str | None
    model_run_uri: str | None
    code_version: str | None
    blessed: bool | None
    pushed_version: str | None  # the version its Pusher published or found served
    blessed_by_hand: str | None = None  # "who: why", when a person blessed its model later
    evaluation_uri: str | None = None  # the Evaluator's output: TFMA's, the eval outcomes

    @property
    def metrics(self) -> dict[str, float]:
        return (self.summary or {}).get("metrics") or {}

    @property
    def accuracy(self) -> float | None:
        return self.metrics.get("accuracy")

    @property
    def baseline_accuracy(self) -> float | None:
        return ((self.summary or {}).get("baseline_metrics") or {}).get("accuracy")

    @property
    def blessing_reason(self) -> str:
        return (self.summary or {}).get("blessing_reason") or ""

    @property
    def model_status(self) -> str | None:
        """executed (trained in this run) or cached (the same model as an earlier run)."""
        return self.statuses.get(NodeIds.TRAINER)

    @property
    def outcome(self) -> str:
        """How the run ended, in the words of its webhook message
        (pipeline/results/run_outcome.py)."""
        if self.summary is None:
            if any(status in ("failed", "interrupted") for status in self.statuses.values()):
                return FAILED
            return "finished (no summary noted)"
        fields = ("interrupted", "data_rejected", "succeeded", "blessed", "pushed_model")
        return run_outcome(types.SimpleNamespace(**{f: self.summary.get(f) for f in fields}))


@dataclasses.dataclass
class RunHistory:
    """A run folder's runs, newest first, and every version its serving folder served."""

    run_dir: pathlib.Path
    pipeline: str
    runs: list[RunEntry]
    versions: dict[str, ServedVersion]  # by version name, oldest push first

    def find(self, ref: str) -> RunEntry:
        """The run `ref` names: its number as `runs` lists it (1 is the newest), its id,
        or a prefix of its id that only it has.

        Raises:
          LookupError: no run, or more than one, matches.
        """
        if ref.isdigit() and 1 <= int(ref) <= len(self.runs):
            return self.runs[int(ref) - 1]
        exact = [run for run in self.runs if run.run_id == ref]
        found = exact or [run for run in self.runs if run.run_id.startswith(ref)]
        if len(found) == 1:
            return found[0]
        what = "no run" if not found else f"{len(found)} runs"
        raise LookupError(
            f"{what} in {self.run_dir} match {ref!r}: give a number from `tpu-pipeline runs` "
            f"(1 to {len(self.runs)}) or a run id"
        )

    def previous(self, run: RunEntry) -> RunEntry | None:
        """The run before `run`, if any."""
        return self.runs[run.number] if run.number < len(self.runs) else None


def _property(record: Any, name: str) -> Any:
    """A property or custom property of an MLMD record (int, double or string), or None."""
    for properties in (record.properties, record.custom_properties):
        if name in properties:
            value = properties[name]
            kind = value.WhichOneof("value")
            return getattr(value, kind) if kind else None
    return None


def _json(text: Any) -> Any:
    try:
        return json.loads(text) if isinstance(text, str) and text else None
    except ValueError:
        return None


def open_run_folder(run_dir: pathlib.Path) -> metadata_store.MetadataStore:
    """The run folder's ML Metadata store, read-only.

    Raises:
      RunFolderNotFoundError: the folder or its store does not exist.
      DamagedMetadataError: the store is damaged.
    """
    path = pathlib.Path(run_dir) / METADATA_FILE
    if not path.exists():  # connecting to a missing SQLite store would create it
        what = (
            "is not a folder" if not pathlib.Path(run_dir).is_dir() else f"has no {METADATA_FILE}"
        )
        raise RunFolderNotFoundError(
            f"{run_dir} {what}: name a run folder such as output/tpu-pipeline-digits, "
            "or run `tpu-pipeline run` first"
        )
    return metadata_store.MetadataStore(checked_connection(path, writable=False))


def read_history(run_dir: pathlib.Path) -> RunHistory:
    """Every run recorded in `run_dir`'s ML Metadata store, newest first.

    Raises:
      RunFolderNotFoundError: no store in the folder.
      DamagedMetadataError: the store is damaged.
    """
    run_dir = pathlib.Path(run_dir).resolve()
    store = open_run_folder(run_dir)
    pipelines = store.get_contexts_by_type("pipeline")
    if not pipelines:
        return RunHistory(run_dir, "", [], {})
    pipeline = max(pipelines, key=lambda context: context.id).name
    prefix = f"{pipeline}."
    node_of: dict[int, str] = {}
    for context in store.get_contexts_by_type("node"):
        if context.name.startswith(prefix):
            for execution in store.get_executions_by_context(context.id):
                node_of[execution.id] = context.name.removeprefix(prefix)
    run_contexts = sorted(
        store.get_contexts_by_type("pipeline_run"), key=lambda c: c.id, reverse=True
    )
    executions_of = {run.id: store.get_executions_by_context(run.id) for run in run_contexts}
    execution_ids = [e.id for executions in executions_of.values() for e in executions]
    events = store.get_events_by_execution_ids(execution_ids) if execution_ids else []
    artifacts = {
        a.id: a
        for a in (store.get_artifacts_by_id([e.artifact_id for e in events]) if events else [])
    }
    outputs: dict[int, dict[str, list[metadata_store_pb2.Artifact]]] = {}
    for event in events:
        if event.type in _OUTPUTS and event.artifact_id in artifacts:
            key = event.path.steps[0].key if event.path.steps else "output"
            outputs.setdefault(event.execution_id, {}).setdefault(key, []).append(
                artifacts[event.artifact_id]
            )
    versions = _served_versions(store, run_dir / SERVING_DIR)
    runs = [
        _entry(number, run, executions_of[run.id], node_of, outputs)
        for number, run in enumerate(run_contexts, start=1)
    ]
    by_hand = _manual_blessings(store)
    for run in runs:
        if run.model_id in by_hand:
            run.blessed, run.blessed_by_hand = True, by_hand[run.model_id]
    return RunHistory(run_dir, pipeline, runs, versions)


def _manual_blessings(store: metadata_store.MetadataStore) -> dict[int, str]:
    """`who: why` of each model a person blessed after its run, by its ML Metadata id."""
    found = {}
    for blessing in store.get_artifacts_by_type("ModelBlessing"):
        reason = _property(blessing, MANUAL_REASON)
        if reason and _property(blessing, "blessed") == 1:
            who = _property(blessing, MANUAL_BLESSED_BY) or "someone"
            found[_property(blessing, "current_model_id")] = f"{who}: {reason}"
    return found


def _entry(
    number: int,
    run: metadata_store_pb2.Context,
    executions: list[metadata_store_pb2.Execution],
    node_of: dict[int, str],
    outputs: dict[int, dict[str, list[metadata_store_pb2.Artifact]]],
) -> RunEntry:
    newest: dict[str, metadata_store_pb2.Execution] = {}
    for execution in sorted(executions, key=lambda e: e.id):
        if execution.id in node_of:
            newest[node_of[execution.id]] = execution
    statuses = {node: _STATUS.get(e.last_known_state, "failed") for node, e in newest.items()}

    def output(node: str, key: str) -> metadata_store_pb2.Artifact | None:
        execution = newest.get(node)
        found = outputs.get(execution.id, {}).get(key) if execution is not None else None
        return found[0] if found else None

    summary = _json(_property(run, RUN_SUMMARY_PROPERTY))
    config = _json(_property(run, RUN_CONFIG_PROPERTY))
    trainer = newest.get(NodeIds.TRAINER)
    custom_config = _json(_property(trainer, "custom_config")) if trainer is not None else None
    partial = config is None and custom_config is not None
    if partial:  # a run from before the notes: what its Trainer received
        config = {k: v for k, v in custom_config.items() if k in ("dataset", "trainer")}
    examples = output(NodeIds.EXAMPLE_GEN, "examples")
    model = output(NodeIds.TRAINER, "model")
    model_run = output(NodeIds.TRAINER, "model_run")
    blessing = output(NodeIds.EVALUATOR, "blessing")
    evaluation = output(NodeIds.EVALUATOR, "evaluation")
    pushed = output(NodeIds.PUSHER, "pushed_model")
    blessed = summary.get("blessed") if summary else None
    if blessed is None and blessing is not None and _property(blessing, "blessed") is not None:
        blessed = bool(_property(blessing, "blessed"))
    destination = _property(pushed, PUSHED_DESTINATION) if pushed is not None else None
    times = [e.last_update_time_since_epoch for e in executions] or [run.create_time_since_epoch]
    return RunEntry(
        number=number,
        run_id=run.name,
        started=run.create_time_since_epoch / 1000,
        finished=max(times) / 1000,
        statuses=statuses,
        config=config,
        config_is_partial=partial,
        summary=summary,
        inputs=_json(_property(run, RUN_INPUTS_PROPERTY)),
        span=_property(examples, "span") if examples is not None else None,
        model_id=model.id if model is not None else None,
        model_uri=model.uri if model is not None else None,
        model_run_uri=model_run.uri if model_run is not None else None,
        code_version=(custom_config or {}).get(CODE_VERSION_KEY),
        blessed=blessed,
        pushed_version=os.path.basename(destination) if destination else None,
        evaluation_uri=evaluation.uri if evaluation is not None else None,
    )


def _served_versions(
    store: metadata_store.MetadataStore, serving_dir: pathlib.Path
) -> dict[str, ServedVersion]:
    """Each version a push published (the Pusher's or a manual blessing's), oldest first,
    with when it served: until the next push, until it was set aside, or still."""
    pushes = store.get_artifacts_by_type("PushedModel")  # none before the first push
    first_push: dict[str, tuple[float, str]] = {}
    for artifact in sorted(pushes, key=lambda a: a.id):
        destination = _property(artifact, PUSHED_DESTINATION)
        if not _property(artifact, "pushed") or not destination:
            continue
        version = os.path.basename(destination)
        first_push.setdefault(version, (artifact.create_time_since_epoch / 1000, destination))
    set_aside = _set_aside_notes(serving_dir)
    in_place = _versions_in_place(serving_dir)
    ordered = sorted(first_push.items(), key=lambda item: item[1][0])
    versions: dict[str, ServedVersion] = {}
    for index, (version, (pushed_at, path)) in enumerate(ordered):
        until, why = None, ""
        if index + 1 < len(ordered):
            until, why = ordered[index + 1][1][0], "a newer push"
        note = set_aside.get(version)
        if note is not None:
            until, why = note
        elif in_place is not None and version not in in_place:
            why = why or "no longer in the serving folder"
        versions[version] = ServedVersion(version, path, pushed_at, until, why)
    return versions


def _versions_in_place(serving_dir: pathlib.Path) -> set[str] | None:
    if not serving_dir.is_dir():
        return None
    return {p.name for p in serving_dir.iterdir() if p.name.isdigit() and p.is_dir()}


def _set_aside_notes(serving_dir: pathlib.Path) -> dict[str, tuple[float | None, str]]:
    """Versions a rollback or pin set aside (components/serving/versions.py): when, and why."""
    found: dict[str, tuple[float | None, str]] = {}
    for path in sorted((serving_dir / ".rolled_back").glob("*.json")):
        note = _json(path.read_text()) if path.is_file() else None
        if not isinstance(note, dict):
            continue
        try:
            when = datetime.datetime.fromisoformat(note["when"]).timestamp()
        except (KeyError, TypeError, ValueError):
            when = None
        found[path.stem] = (when, str(note.get("action") or "set aside"))
    return found
