"""Rollback, pin, unpin, restore and bless on Vertex AI, each one recoverable operation.

An action changes up to three things: the Model Registry's labels and aliases (what
serves), Vertex ML Metadata's blessings (the next run's baseline) and the endpoint's
traffic. In the order the local path moves its serving folder and then ML Metadata:

1. the intent: the label `tpu_pipeline_intent` on the version the action is about
   (the one rolled back, pinned, restored or blessed), `<action>-<serves>-<seconds>`;
2. the registry's labels and aliases (`kubeflow/model_aliases.py`,
   `kubeflow/registry_blessing.py`);
3. Vertex ML Metadata (`kubeflow/registry_baseline.py`, `kubeflow/metadata_blessing.py`);
4. the endpoint's traffic, and the undeploys it allows (`kubeflow/endpoint_traffic.py`);
5. the intent label removed.

A version that still carries the label tells the next registry command (and the
registry Pusher, before it pushes) that an action stopped between two steps: it
finishes it, saying so in one line. Each step is a reconciliation (a label or alias
already in place is not sent again; the metadata follows whatever the registry
says), so finishing twice changes nothing, and a step done before the stop is not
undone.

Why a registry label: on Vertex there is no local folder every command and run can
read, and no lock they share. The registry is what the first step changes, every
command and the Pusher list its versions anyway, the label is written with the same
call and credentials as that step, and `serving list --vertex` shows it. Computing
the registry step from the versions with the label already on them keeps it there
(an UpdateModel's labels replace them all). For an upload (a bless of a model the
registry lacks) the label comes with the upload itself: no version, no half-done
action. Label values are short ([a-z0-9_-], 63 characters), so the intent holds
what finishing needs and nothing more: the action, the version that gets `default`
(`self` when it is the labelled one, `none`) and when.
"""

from __future__ import annotations

import dataclasses
import datetime
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from common.config import ModelRegistryConfig, PipelineConfig
from common.tfx_api import io_utils
from components.serving.server_check import ServingCheckError, check_model
from kubeflow import (
    endpoint_traffic,
    metadata_blessing,
    model_aliases,
    registry_baseline,
    registry_blessing,
)
from kubeflow import vertex_types as gca
from kubeflow.model_aliases import RegistryActionError, RegistryChange
from kubeflow.model_registry import PINNED_ALIAS, is_rolled_back
from kubeflow.runner import require_vertex
from kubeflow.vertex_api import UPLOAD_TIMEOUT_S
from kubeflow.vertex_requests import ApiCall, parent

INTENT_LABEL = "tpu_pipeline_intent"
SELF = "self"  # the intent's version that gets `default` is the labelled one
NONE = "none"
# The actions that set versions aside or bring them back (as `serving` does locally).
BASELINE_ACTIONS = ("rollback", "pin", "restore")
HALF_DONE = (
    "the action is half done: the next `tpu-pipeline serving ... --vertex` command "
    "or registry Pusher finishes it"
)
# Stand-in, in a dry run, for the version the intent label goes on.
FOUND_TARGET = "<the version the action is about>"

Send = Callable[[ApiCall], Any]
Say = Callable[[str], None]


@dataclasses.dataclass(frozen=True)
class Intent:
    """What an action left half done is: its name, who gets `default`, since when."""

    action: str
    serves: str  # a version id, SELF or NONE
    since: int  # seconds since the epoch

    def label(self) -> str:
        return f"{self.action}-{self.serves}-{self.since}"

    @classmethod
    def parse(cls, value: str) -> Intent | None:
        """The intent a label value holds, None when it is not one of ours."""
        parts = value.split("-")
        if len(parts) != 3 or not parts[2].isdigit():
            return None
        return cls(parts[0], parts[1], int(parts[2]))

    def serving(self, labelled: str) -> str | None:
        """The version id that gets `default` (None: the action gives it to none)."""
        return {SELF: labelled, NONE: None}.get(self.serves, self.serves)

    def when(self) -> str:
        since = datetime.datetime.fromtimestamp(self.since, datetime.timezone.utc)
        return since.isoformat(timespec="seconds")


@dataclasses.dataclass
class Registry:
    """The registry entry an action works on, with its versions as last read.

    `config` is None in the registry Pusher, which knows only the registry's settings
    and location: it finishes what needs no more (not a bless, which needs the
    pipeline's name to find its context).
    """

    config: PipelineConfig | None
    location: str  # projects/P/locations/R
    settings: ModelRegistryConfig
    send: Send
    say: Say
    model_name: str | None
    versions: list[gca.Model]

    def reread(self) -> None:
        self.versions = list(self.send(model_aliases.list_versions_call(self.model_name)))

    def version(self, version_id: str) -> gca.Model:
        """The version as last read; RegistryActionError when the registry lists none such."""
        found = next((v for v in self.versions if v.version_id == version_id), None)
        if found is None:
            raise RegistryActionError(
                f"{self.model_name}: no version {version_id} in the registry's list"
            )
        return found


def open_registry(config: PipelineConfig, send: Send, say: Say, may_be_new: bool) -> Registry:
    """Finds the entry (`vertex.model_registry`) and its versions, and finishes what an
    earlier action left half done.

    Raises:
      RegistryActionError: no entry matches (unless `may_be_new`: a bless creates it).
    """
    lookup = model_aliases.find_model_call(config)
    found = list(send(lookup))
    if not found and not may_be_new:
        raise RegistryActionError(f"no registry entry matches {lookup.request.filter}")
    settings = require_vertex(config).model_registry
    registry = Registry(config, parent(config), settings, send, say, None, [])
    if found:
        registry.model_name = found[0].name
        registry.reread()
        finish_left_over(registry)
    return registry


def finish_before_push(
    settings: ModelRegistryConfig, project: str, region: str, send: Send, say: Say
) -> None:
    """The registry Pusher's turn: finishes what an action left half done before it pushes.

    Raises:
      RegistryActionError: a step failed again (the push waits for it).
    """
    location = f"projects/{project}/locations/{region}"
    found = list(send(model_aliases.model_lookup_call(location, settings.model_display_name)))
    if found:
        registry = Registry(None, location, settings, send, say, found[0].name, [])
        registry.reread()
        finish_left_over(registry)


def left_over(versions: Sequence[gca.Model]) -> Iterator[tuple[gca.Model, Intent]]:
    """The versions that carry an intent label, with the intent."""
    for version in versions:
        intent = Intent.parse(version.labels.get(INTENT_LABEL, ""))
        if intent is not None:
            yield version, intent


def finish_left_over(registry: Registry) -> None:
    """Finishes every action the registry shows left half done, one line each."""
    for version, intent in list(left_over(registry.versions)):
        version_id = version.version_id
        head = (
            f"{registry.model_name}@{version_id}: the {intent.action} of {intent.when()} "
            "was left half done"
        )
        change = model_aliases.finishing_change(
            intent.action,
            registry.model_name,
            registry.versions,
            version_id,
            intent.serving(version_id),
        )
        metadata = _follow
        if intent.action == "bless":
            metadata = _finishing_bless(registry, version, change, head)
            if metadata is None:
                continue
        registry.say(f"{head}; finishing it")
        _complete(registry, version_id, intent, change, metadata)
        registry.say(change.summary)


def _finishing_bless(
    registry: Registry, version: gca.Model, change: RegistryChange, head: str
) -> Metadata | None:
    """The metadata step that finishes a bless (its note added to `change` if missing), or
    None, said in one line, when it cannot be finished here."""
    if registry.config is None:
        registry.say(f"{head}; the next registry command finishes it (it needs the config)")
        return None
    uri = version.artifact_uri  # a version bless uploaded serves from the model's folder
    try:
        place = metadata_blessing.find_place(registry.config, uri, registry.send)
    except RegistryActionError as error:
        registry.say(
            f"{head}; cannot finish it here ({error}): `tpu-pipeline serving bless --vertex "
            "--model-uri` of the Trainer's folder again finishes it"
        )
        return None
    if registry_blessing.BLESSED_LABEL not in version.labels:  # stopped before its note
        note = model_aliases.Note(None)
        marked = {**version.labels, registry_blessing.BLESSED_LABEL: note.stamp()}
        change.calls["describe_blessing"] = note.describe(
            registry.model_name, version.version_id, registry_blessing.BLESSED, labels=marked
        )
    return _record(place, uri, uri, "finishing an interrupted blessing")


def move(registry: Registry, action: str, version: str | None, reason: str) -> None:
    """Rollback, pin, unpin or restore: the registry, Vertex ML Metadata, the endpoint.

    Raises:
      RegistryActionError: the action cannot be done (nothing was changed), or a step
        failed (one line: what is half done; the next command finishes it).
    """
    versions, name = registry.versions, registry.model_name
    change = model_aliases.registry_change(action, name, versions, version, reason)
    if action == "unpin":  # one alias call: nothing to leave half done
        for call in change.calls.values():
            registry.send(call)
        registry.say(change.summary)
        return
    target = model_aliases.served_version(versions).version_id if action == "rollback" else version
    serves = (
        NONE if change.serving is None else SELF if change.serving == target else change.serving
    )
    intent = Intent(action, serves, int(datetime.datetime.now(datetime.timezone.utc).timestamp()))
    _write_intent(registry, target, intent)
    change = model_aliases.registry_change(action, name, registry.versions, version, reason)
    _complete(registry, target, intent, change, _follow)
    registry.say(change.summary)


def bless(registry: Registry, model_uri: str, reason: str) -> None:
    """`serving bless --vertex`: serving check, upload (or `default`), the blessing in
    Vertex ML Metadata, the endpoint.

    Raises:
      RegistryActionError: a pin stands, the model was rolled back, Vertex ML Metadata
        does not know it or it fails the serving check (nothing was changed), or a step
        failed after the upload (the next command finishes it).
    """
    config, name = registry.config, registry.model_name
    vertex = require_vertex(config)
    fingerprint = registry_blessing.model_label(model_uri)

    def change_now() -> RegistryChange:
        return registry_blessing.bless_change(
            vertex.model_registry,
            parent(config),
            name,
            registry.versions,
            model_uri,
            fingerprint,
            reason,
        )

    change = change_now()
    place = metadata_blessing.find_place(config, model_uri, registry.send)  # before moving
    registry.say(f"serving check: {serving_check(config, model_uri)}")
    stamp = int(datetime.datetime.now(datetime.timezone.utc).timestamp())
    intent = Intent("bless", SELF, stamp)
    if change.serving is None:  # a new version: the upload carries the intent
        upload = change.calls["upload"]
        upload.request.model.labels[INTENT_LABEL] = intent.label()
        uploaded = _upload(registry, upload, model_uri)
        registry.model_name, target = uploaded.model, uploaded.model_version_id
        registry.reread()
        change = RegistryChange({}, target, change.summary)
    else:
        target = change.serving
        _write_intent(registry, target, intent)
        change = change_now()
    registry.say(f"{change.summary} as {registry.model_name}@{target}")
    served_uri = next(
        (v.artifact_uri for v in registry.versions if v.version_id == target), model_uri
    )  # a version uploaded now serves from the model's folder
    _complete(registry, target, intent, change, _record(place, model_uri, served_uri, reason))


def _upload(registry: Registry, upload: ApiCall, model_uri: str) -> Any:
    """Sends the upload and waits for it: the uploaded version (its model and version id)."""
    from google.api_core import exceptions

    try:
        operation = registry.send(upload)
    except exceptions.GoogleAPIError as error:
        raise RegistryActionError(
            f"{model_uri}: the upload failed ({error}); nothing changed"
        ) from None
    try:
        return operation.result(timeout=UPLOAD_TIMEOUT_S)
    except (exceptions.GoogleAPIError, TimeoutError) as error:
        raise RegistryActionError(
            f"{model_uri}: the upload did not finish ({error}); if the version appears, the "
            "next `tpu-pipeline serving ... --vertex` command finishes the blessing"
        ) from None


def serving_check(config: PipelineConfig, model_uri: str) -> str:
    """Runs the Pusher's serving check on `model_uri` (copied here first), with its budget.

    Returns the check's result in words (which server, how long).

    Raises:
      RegistryActionError: the model failed the check, with the Pusher's wording.
    """
    with tempfile.TemporaryDirectory(prefix="bless-check-") as local:
        io_utils.copy_dir(model_uri, local)  # a gs:// folder: the server reads local files
        try:
            result = check_model(
                local, config.dataset.num_classes, config.serving.check_timeout_seconds
            )
        except ServingCheckError as error:
            raise RegistryActionError(
                f"{model_uri}: the candidate failed the serving check ({error}); "
                "nothing was uploaded"
            ) from None
    return result.to_text()


def _write_intent(registry: Registry, version_id: str, intent: Intent) -> None:
    """Labels the version with the intent, and keeps the versions read in step."""
    version = registry.version(version_id)
    labels = {**version.labels, INTENT_LABEL: intent.label()}
    registry.send(model_aliases.labels_call(registry.model_name, version_id, labels))
    version.labels = labels


Metadata = Callable[[Registry, RegistryChange], None]


def _complete(
    registry: Registry, target: str, intent: Intent, change: RegistryChange, metadata: Metadata
) -> None:
    """Steps 2 to 5: the registry, Vertex ML Metadata, the endpoint, the intent removed."""
    name = registry.model_name

    def registry_step() -> None:
        for call in change.calls.values():
            registry.send(call)

    if change.calls:
        _step(f"{name}@{target}", f"the {intent.action} in the registry", registry_step)
        registry.reread()
    _step(f"{name}@{target}", "Vertex ML Metadata", lambda: metadata(registry, change))
    if change.serving is not None:
        _step(f"{name}@{target}", "the endpoint", lambda: _move_traffic(registry, change.serving))

    def clear_intent() -> None:
        labels = registry.version(target).labels
        kept = {key: value for key, value in labels.items() if key != INTENT_LABEL}
        registry.send(model_aliases.labels_call(name, target, kept))

    _step(f"{name}@{target}", "removing the intent label", clear_intent)
    registry.reread()


def _follow(registry: Registry, change: RegistryChange) -> None:
    """The blessings of Vertex ML Metadata follow the registry's labels, as they are now."""
    changed = registry_baseline.follow_registry(
        registry_baseline.store_in(registry.location),
        registry.model_name,
        registry.versions,
        registry.send,
    )
    for what, names in changed.items():
        if names:
            registry.say(f"baseline: {what} {len(names)} blessing(s) in Vertex ML Metadata")


def _record(
    place: metadata_blessing.BlessingPlace, model_uri: str, served_uri: str, reason: str
) -> Metadata:
    """The metadata step of a bless: its ModelBlessing recorded."""

    def record(registry: Registry, change: RegistryChange) -> None:
        blessing = metadata_blessing.record_blessing(
            place, model_uri, served_uri, reason, registry.send
        )
        registry.say(f"baseline: recorded {blessing} in Vertex ML Metadata")

    return record


def _move_traffic(registry: Registry, version: str) -> None:
    """All the endpoint's traffic to `version`; this entry's idle older versions undeployed."""
    name, settings = registry.model_name, registry.settings
    if not settings.endpoint_display_name:
        return
    lookup = endpoint_traffic.find_endpoint_call(registry.location, settings)
    endpoints = list(registry.send(lookup))
    if not endpoints:
        registry.say(f"no endpoint matches {lookup.request.filter}: only the alias moved")
        return
    endpoint = endpoints[0]
    call = endpoint_traffic.traffic_call(endpoint, name, version, settings)
    registry.send(call)
    if call.method == "EndpointService.DeployModel":
        registry.say(
            f"deploying {name}@{version} to {endpoint.name}: it takes all the traffic "
            "when the deploy is done"
        )
    else:
        registry.say(f"{endpoint.name}: all traffic to {name}@{version}")
    pinned = {v.version_id for v in registry.versions if PINNED_ALIAS in v.version_aliases}
    for version_id, undeploy in endpoint_traffic.retire_calls(
        endpoint, name, version, pinned
    ).items():
        registry.send(undeploy)
        registry.say(f"undeployed {name}@{version_id} from {endpoint.name}")


def _step(where: str, what: str, step: Callable[[], Any]) -> Any:
    """Runs one step after the intent; a failure becomes one line saying what is half done."""
    from google.api_core import exceptions

    try:
        return step()
    except exceptions.GoogleAPIError as error:
        raise RegistryActionError(f"{where}: {what} failed ({error}); {HALF_DONE}") from None
    except RegistryActionError as error:  # says what failed already
        raise RegistryActionError(f"{error}; {HALF_DONE}") from None


def version_lines(versions: Sequence[gca.Model]) -> list[str]:
    """A line per version: its aliases, why it is pinned or rolled back, a half-done action."""
    lines = []
    for found in sorted(versions, key=lambda v: int(v.version_id)):
        marks = list(found.version_aliases)
        if is_rolled_back(found.labels) or PINNED_ALIAS in marks:
            marks.append(found.version_description)
        intent = Intent.parse(found.labels.get(INTENT_LABEL, ""))
        if intent is not None:
            marks.append(f"{intent.action} of {intent.when()} left half done")
        lines.append(f"{found.version_id}  {', '.join(marks)}")
    return lines


def planned_calls(
    config: PipelineConfig, action: str, version: str | None, reason: str, model_uri: str | None
) -> dict[str, ApiCall]:
    """Every request a real action may send, in order, with stand-ins for the lookups'."""
    lookup = model_aliases.find_model_call(config)
    planned = {
        "lookup": lookup,
        "versions": model_aliases.list_versions_call(model_aliases.FOUND_MODEL),
    }
    if action == "list":
        return planned
    intent = model_aliases.labels_call(
        model_aliases.FOUND_MODEL, FOUND_TARGET, {INTENT_LABEL: f"{action}-<serves>-<seconds>"}
    )
    if action == "bless":
        registry = require_vertex(config).model_registry
        planned.update(metadata_blessing.planned_lookups(config, model_uri))
        bless_calls = registry_blessing.planned_bless(registry, parent(config), model_uri, reason)
        upload = bless_calls["if_not_registered"].request.model
        upload.labels[INTENT_LABEL] = intent.request.model.labels[INTENT_LABEL]
        planned["if_registered_write_intent"] = intent
        planned.update(bless_calls)
        planned.update(metadata_blessing.planned_record(config, model_uri, reason))
        serving = registry_blessing.FOUND_BLESSED
    else:
        if action != "unpin":
            planned["write_intent"] = intent
        planned.update(model_aliases.planned_change(action, version, reason))
        if action in BASELINE_ACTIONS:
            store = registry_baseline.metadata_store(config)
            planned.update(registry_baseline.planned_baseline_calls(store))
        serving = model_aliases.FOUND_PREVIOUS if action == "rollback" else version
    if action != "unpin":
        planned.update(
            endpoint_traffic.planned_traffic_calls(config, model_aliases.FOUND_MODEL, serving)
        )
        planned["clear_intent"] = model_aliases.labels_call(
            model_aliases.FOUND_MODEL, FOUND_TARGET, {}
        )
    return planned
