"""Rollback, pin, unpin, restore and bless on Vertex AI: the protocol's Vertex backend.

An action changes up to three things: the Model Registry's labels and aliases (what
serves), Vertex ML Metadata's blessings (the next run's baseline) and the endpoint's
traffic. Each keeps the order of `serving_ops/protocol.py`, as the local actions do,
with the registry's own means:

1. settle: intents other actors left on the entry's versions
   (`serving_ops/vertex/intents.py`): one whose lease expired is taken over and
   finished, saying whose it was; a live one is waited for (`--wait`) or refused;
2. claim: the intent labels on the version the action is about (for a new upload, the
   version that serves until then), a conditional write on its `etag`, and a read that
   shows no other actor claimed meanwhile;
3. what the action sends is decided again from that read; if it changed, the claim is
   dropped and the action decided anew;
4. the registry's labels (each a read-modify-write on the version's `etag`) and aliases
   (`serving_ops/vertex/aliases.py`, `serving_ops/vertex/blessing.py`);
5. Vertex ML Metadata (`serving_ops/vertex/baseline.py`,
   `serving_ops/vertex/metadata_blessing.py`);
6. the endpoint's traffic, and the undeploys it allows (`serving_ops/vertex/endpoint.py`);
7. finish: the intent labels removed.

A step that fails ends the lease and leaves the intent: the next registry command (and
the registry Pusher, before it pushes) finishes it. Each step is a reconciliation (a
label or alias already in place is not sent again; the metadata follows whatever the
registry says), so finishing twice changes nothing, and a step done before the stop is
not undone. `serving list --vertex` finishes only what an owner left behind, never an
action whose lease is live.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

from tpu_pipeline.common import vertex_types as gca
from tpu_pipeline.common.config import PipelineConfig, require_vertex
from tpu_pipeline.common.tfx_api import io_utils
from tpu_pipeline.common.vertex_api import UPLOAD_TIMEOUT_S, ApiCall
from tpu_pipeline.common.work_dirs import WorkDirs
from tpu_pipeline.components.serving.server_check import ServingCheckError, check_model
from tpu_pipeline.serving_ops import protocol
from tpu_pipeline.serving_ops.protocol import Operation, Owner, Patience
from tpu_pipeline.serving_ops.vertex import aliases, baseline, blessing, endpoint, metadata_blessing
from tpu_pipeline.serving_ops.vertex.aliases import RegistryChange
from tpu_pipeline.serving_ops.vertex.entry import (
    PINNED_ALIAS,
    Registry,
    RegistryActionError,
    is_rolled_back,
)
from tpu_pipeline.serving_ops.vertex.intents import (  # noqa: F401 (INTENT_LABEL: what tests look for)
    INTENT_LABEL,
    NEW,
    NONE,
    SELF,
    Intent,
    RegistryStore,
    described,
)
from tpu_pipeline.serving_ops.vertex.transport import Transport, conflict_errors

HALF_DONE = (
    "the action is half done: the next `tpu-pipeline serving ... --vertex` command "
    "or registry Pusher finishes it"
)
# How long a command waits for another actor's live intent (`--wait` sets it).
DEFAULT_WAIT_SECONDS = 120.0
# A registry model copied here for the serving check before a manual blessing.
CHECKED_COPIES = WorkDirs("bless-check", "local copy of the model to check")
# How long an actor waits for an endpoint's creation, a deploy or an undeploy.
OPERATION_TIMEOUT_S = 3600.0

Say = Callable[[str], None]
Step = Callable[[], list[str]]
Metadata = Callable[[Registry, RegistryChange], None]


def open_registry(config: PipelineConfig, send: Transport, say: Say, may_be_new: bool) -> Registry:
    """Finds the entry (`vertex.model_registry`) and reads its versions.

    Raises:
      RegistryActionError: no entry matches (unless `may_be_new`: a bless creates it).
    """
    lookup = aliases.find_model_call(config)
    found = list(send(lookup))
    if not found and not may_be_new:
        raise RegistryActionError(f"no registry entry matches {lookup.request.filter}")
    vertex = require_vertex(config)
    registry = Registry(config, vertex.location, vertex.model_registry, send, say, None, [])
    if found:
        registry.model_name = found[0].name
        registry.reread()
    return registry


def patience_for(registry: Registry, seconds: float | None = DEFAULT_WAIT_SECONDS) -> Patience:
    """How long an actor on `registry` waits for another's live intent, by its transport's clock."""
    return Patience(seconds=seconds, clock=registry.send.clock, sleep=registry.send.sleep)


class _Finisher:
    """Finishes what an action left half done (the store's `settle`), or says why not here."""

    def __init__(self, registry: Registry):
        self.registry = registry
        self.places: dict[tuple[str, int], metadata_blessing.BlessingPlace] = {}

    def describe(self, intent: Intent) -> str:
        return described(self.registry.model_name, intent)

    def leave(self, intent: Intent) -> str | None:
        """Why this actor cannot finish `intent` (a bless needs the pipeline's config)."""
        if intent.action != "bless" or intent.serves == NEW:
            return None
        head = f"{self.describe(intent)} was left half done"
        if self.registry.config is None:
            return f"{head}; the next registry command finishes it (it needs the config)"
        uri = self.registry.version(intent.version).artifact_uri  # an upload serves from it
        try:
            place = metadata_blessing.find_place(self.registry.config, uri, self.registry.send)
        except RegistryActionError as error:
            return (
                f"{head}; cannot finish it here ({error}): `tpu-pipeline serving bless --vertex "
                "--model-uri` of the Trainer's folder again finishes it"
            )
        self.places[(intent.version, intent.since)] = place
        return None

    def finish(self, intent: Intent) -> str:
        registry, name = self.registry, self.registry.model_name
        registry.say(f"{self.describe(intent)} was left half done; finishing it")
        if intent.serves == NEW or intent.action == "push":
            # The claim of an upload (the uploaded version carries its own intent), or of a
            # push: the next run registers and deploys what this one did not.
            return f"finished the {intent.action} of {name}@{intent.version}: nothing left to send"
        change = aliases.finishing_change(
            intent.action, name, registry.versions, intent.version, intent.serving()
        )
        metadata: Metadata = _follow
        if intent.action == "bless":
            metadata = self._finishing_bless(intent, change)
        for step in _steps(registry, intent, lambda: change, metadata):
            step()
        return change.summary

    def _finishing_bless(self, intent: Intent, change: RegistryChange) -> Metadata:
        """The metadata step that finishes a bless (its note added to `change` if missing)."""
        version = self.registry.version(intent.version)
        if blessing.BLESSED_LABEL not in version.labels:  # stopped before its note
            note = aliases.Note(None)
            marked = {**version.labels, blessing.BLESSED_LABEL: note.stamp()}
            change.calls["describe_blessing"] = note.describe(
                self.registry.model_name, version.version_id, blessing.BLESSED, labels=marked
            )
        place = self.places[(intent.version, intent.since)]
        uri = version.artifact_uri
        return _record(place, uri, uri, "finishing an interrupted blessing")


def store_for(registry: Registry, owner: Owner | None = None) -> RegistryStore:
    """The protocol's store over `registry`, for one actor."""
    finisher = _Finisher(registry)
    return RegistryStore(registry, owner or Owner.current(), finisher.finish, finisher.leave)


def list_versions(registry: Registry, owner: Owner | None = None) -> list[str]:
    """`serving list --vertex`: finishes what an owner left behind (never a live action),
    then a line per version."""
    if registry.model_name is not None:
        store = store_for(registry, owner)
        protocol.settle_left_over(store, patience_for(registry, 0), registry.say, False)
    return version_lines(registry.versions, registry.send.clock())


def move(
    registry: Registry,
    action: str,
    version: str | None,
    reason: str,
    patience: Patience | None = None,
    owner: Owner | None = None,
) -> None:
    """Rollback, pin, unpin or restore: the registry, Vertex ML Metadata, the endpoint.

    Raises:
      RegistryActionError: the action cannot be done (nothing was changed), or a step
        failed (one line: what is half done; the next command finishes it).
      protocol.Busy: another actor's action stayed in progress longer than the wait.
    """
    store = store_for(registry, owner)
    patience = patience or patience_for(registry)
    name = registry.model_name
    if action == "unpin":  # one alias call: nothing to leave half done
        patience.start()
        protocol.settle_left_over(store, patience, registry.say)
        change = aliases.registry_change(action, name, registry.versions)
        registry.send_change(list(change.calls.values()))
        registry.say(change.summary)
        return
    decided: dict[str, Any] = {}

    def decide() -> tuple[RegistryChange, str]:
        versions = registry.versions
        change = aliases.registry_change(action, name, versions, version, reason)
        target = aliases.served_version(versions).version_id if action == "rollback" else version
        return change, target

    def plan() -> Operation[Intent]:
        change, target = decide()
        serves = (
            NONE if change.serving is None else SELF if change.serving == target else change.serving
        )
        intent = store.new_intent(action, serves, target)
        decided["change"] = change

        def confirm() -> bool:
            try:
                now, target_now = decide()  # from the read that followed the claim
            except RegistryActionError:
                return False
            decided["change"] = now
            return _same(change, target, now, target_now)

        steps = _steps(registry, intent, lambda: decided["change"], _follow)
        return Operation(intent, steps, confirm)

    protocol.carry_out(store, plan, patience, registry.say)
    registry.say(decided["change"].summary)


def bless(
    registry: Registry,
    model_uri: str,
    reason: str,
    patience: Patience | None = None,
    owner: Owner | None = None,
) -> None:
    """`serving bless --vertex`: serving check, upload (or `default`), the blessing in
    Vertex ML Metadata, the endpoint.

    Raises:
      RegistryActionError: a pin stands, the model was rolled back, Vertex ML Metadata
        does not know it or it fails the serving check (nothing was changed), or a step
        failed after the upload (the next command finishes it).
      protocol.Busy: another actor's action stayed in progress longer than the wait.
    """
    config = registry.config
    vertex = require_vertex(config)
    fingerprint = blessing.model_label(model_uri)
    store = store_for(registry, owner)
    patience = patience or patience_for(registry)
    patience.start()
    if registry.model_name is not None:
        protocol.settle_left_over(store, patience, registry.say)

    def change_now() -> RegistryChange:
        return blessing.bless_change(
            vertex.model_registry,
            vertex.location,
            registry.model_name,
            registry.versions,
            model_uri,
            fingerprint,
            reason,
        )

    change_now()  # a pin or a rolled-back model refuses it before anything is read or run
    place = metadata_blessing.find_place(config, model_uri, registry.send)  # before moving
    checked = registry.send.step(
        "ServingCheck", lambda: serving_check(config, model_uri), model_uri=model_uri
    )
    registry.say(f"serving check: {checked}")
    if not registry.versions:  # the entry's first version: no version to claim yet
        _bless_first_version(registry, store, change_now(), place, model_uri, reason)
        return
    decided: dict[str, Any] = {}

    def plan() -> Operation[Intent]:
        change = change_now()
        decided["change"] = change
        if change.serving is None:  # a new version: claim the one that serves until then
            serving = aliases.served_version(registry.versions) or registry.versions[-1]
            intent = store.new_intent("bless", NEW, serving.version_id)
            keep = keeping(store, intent, registry)  # the claim outlasts a long upload
            steps = _upload_steps(registry, store, decided, place, model_uri, reason, keep)
        else:
            intent = store.new_intent("bless", SELF, change.serving)
            record = _record(
                place, model_uri, registry.version(change.serving).artifact_uri, reason
            )
            summary = f"{change.summary} as {registry.name_of(change.serving)}"
            steps = [
                _say(registry, summary),
                *_steps(registry, intent, lambda: decided["change"], record),
            ]

        def confirm() -> bool:
            try:
                now = change_now()
            except RegistryActionError:
                return False
            decided["change"] = now
            return _same(change, change.serving, now, now.serving)

        return Operation(intent, steps, confirm)

    protocol.carry_out(store, plan, patience, registry.say)


def _upload_steps(
    registry: Registry,
    store: RegistryStore,
    decided: dict[str, Any],
    place: metadata_blessing.BlessingPlace,
    model_uri: str,
    reason: str,
    keep: Callable[[], None],
) -> list[Step]:
    """A bless that uploads: the upload carries an intent of its own, finished from the
    uploaded version if this actor stops; then the blessing, the endpoint, that intent."""

    def upload() -> list[str]:
        change = decided["change"]
        own = store.new_intent("bless", SELF, "")
        call = change.calls["upload"]
        call.request.model.labels.update(own.labels())
        uploaded = _upload(registry, call, model_uri, keep)
        registry.model_name, target = uploaded.model, uploaded.model_version_id
        registry.reread()
        mine = dataclasses.replace(own, version=target)
        # Its lease began with the upload, which may have taken longer than a lease.
        decided["uploaded"] = store.renew(mine, registry.send.clock() + store.lease_seconds)
        decided["change"] = RegistryChange({}, target, change.summary)
        registry.say(f"{change.summary} as {registry.name_of(target)}")
        return []

    def record() -> list[str]:
        target = decided["uploaded"].version
        served_uri = registry.version(target).artifact_uri  # it serves from the model's folder
        where = registry.name_of(target)
        _step(
            where,
            "Vertex ML Metadata",
            lambda: _record(place, model_uri, served_uri, reason)(registry, decided["change"]),
        )
        return []

    def traffic() -> list[str]:
        target = decided["uploaded"].version
        _step(registry.name_of(target), "the endpoint", lambda: _move_traffic(registry, target))
        return []

    def its_intent() -> list[str]:
        uploaded = decided["uploaded"]
        _step(
            registry.name_of(uploaded.version),
            "removing the intent label",
            lambda: store.release(uploaded),
        )
        return []

    def abandoning_its_intent(step: Step) -> Step:
        """A step after the upload: what stops it ends the upload's lease too."""

        def guarded() -> list[str]:
            try:
                return step()
            except (Exception, KeyboardInterrupt):
                if "uploaded" in decided:
                    protocol.abandon_quietly(store, decided["uploaded"])
                raise

        return guarded

    return [upload, *(abandoning_its_intent(s) for s in (record, traffic, its_intent))]


def _bless_first_version(
    registry: Registry,
    store: RegistryStore,
    change: RegistryChange,
    place: metadata_blessing.BlessingPlace,
    model_uri: str,
    reason: str,
) -> None:
    """The entry's first version: its upload carries the intent (there is nothing to claim)."""
    decided: dict[str, Any] = {"change": change}
    for step in _upload_steps(registry, store, decided, place, model_uri, reason, lambda: None):
        step()


def _upload(registry: Registry, upload: ApiCall, model_uri: str, keep: Callable[[], None]) -> Any:
    """Sends the upload once and waits for it: the uploaded version (model and version id)."""
    from google.api_core import exceptions

    try:
        operation = registry.send(upload)
    except exceptions.GoogleAPIError as error:
        raise RegistryActionError(
            f"{model_uri}: the upload failed ({error}); nothing changed"
        ) from None
    try:
        return wait_for(operation, keep, UPLOAD_TIMEOUT_S)
    except (exceptions.GoogleAPIError, TimeoutError, concurrent.futures.TimeoutError) as error:
        raise RegistryActionError(
            f"{model_uri}: the upload did not finish ({error}); if the version appears, the "
            "next `tpu-pipeline serving ... --vertex` command finishes the blessing"
        ) from None


def keeping(store: RegistryStore, intent: Intent, registry: Registry) -> Callable[[], None]:
    """Renews the claim's lease while a long operation is waited for."""
    held = {"intent": intent}

    def keep() -> None:
        held["intent"] = protocol.keep_alive(store, held["intent"], registry.send.clock)

    return keep


def wait_for(operation: Any, keep: Callable[[], None], timeout: float = OPERATION_TIMEOUT_S) -> Any:
    """Waits for a long-running operation (an upload, a deploy), renewing the lease between
    looks, so no other actor takes the claim over while it runs."""
    deadline = time.monotonic() + timeout
    while True:
        keep()
        remaining = deadline - time.monotonic()
        try:
            return operation.result(timeout=max(min(remaining, 60.0), 1.0))
        except (TimeoutError, concurrent.futures.TimeoutError):
            if remaining <= 60.0:
                raise


def serving_check(config: PipelineConfig, model_uri: str) -> str:
    """Runs the Pusher's serving check on `model_uri` (copied here first), with its budget.

    Returns the check's result in words (which server, how long).

    Raises:
      RegistryActionError: the model failed the check, with the Pusher's wording.
    """
    with CHECKED_COPIES.owned() as work_dir:
        local = str(work_dir / "model")
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


def _same(before: RegistryChange, target: str, after: RegistryChange, target_after: str) -> bool:
    """Whether a decision made again sends to the same versions as the first one."""
    return (target, before.serving, list(before.calls)) == (
        target_after,
        after.serving,
        list(after.calls),
    )


def _say(registry: Registry, line: str) -> Step:
    """A step that says what the action is about to do (the Vertex actions say as they go)."""

    def step() -> list[str]:
        registry.say(line)
        return []

    return step


def _steps(
    registry: Registry, intent: Intent, change: Callable[[], RegistryChange], metadata: Metadata
) -> list[Step]:
    """Steps 4 to 6 of an action on an existing version: registry, metadata, endpoint."""
    where = registry.name_of(intent.version)

    def in_the_registry() -> list[str]:
        calls = list(change().calls.values())
        if calls:
            _step(
                where, f"the {intent.action} in the registry", lambda: registry.send_change(calls)
            )
            registry.reread()
        return []

    def in_vertex_ml_metadata() -> list[str]:
        _step(where, "Vertex ML Metadata", lambda: metadata(registry, change()))
        return []

    def at_the_endpoint() -> list[str]:
        serving = change().serving
        if serving is not None:
            _step(where, "the endpoint", lambda: _move_traffic(registry, serving))
        return []

    return [in_the_registry, in_vertex_ml_metadata, at_the_endpoint]


def _follow(registry: Registry, change: RegistryChange) -> None:
    """The blessings of Vertex ML Metadata follow the registry's labels, as they are now."""
    changed = baseline.follow_registry(
        baseline.store_in(registry.location),
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
        recorded = metadata_blessing.record_blessing(
            place, model_uri, served_uri, reason, registry.send
        )
        registry.say(f"baseline: recorded {recorded} in Vertex ML Metadata")

    return record


def _move_traffic(registry: Registry, version: str) -> None:
    """All the endpoint's traffic to `version`; this entry's idle older versions undeployed.

    The traffic split is written on the `etag` the endpoint was listed with; one changed
    meanwhile is listed again and decided anew.
    """
    name, settings = registry.model_name, registry.settings
    if not settings.endpoint_display_name:
        return
    if is_rolled_back(registry.read(version).labels):
        raise RegistryActionError(
            f"{registry.name_of(version)} is labelled rolled back: not deployed, no traffic"
        )
    lookup = endpoint.find_endpoint_call(registry.location, settings)
    for attempt in range(4):
        endpoints = list(registry.send(lookup))
        if not endpoints:
            registry.say(f"no endpoint matches {lookup.request.filter}: only the alias moved")
            return
        found = endpoints[0]
        call = endpoint.traffic_call(found, name, version, settings)
        try:
            registry.send(call)
            break
        except conflict_errors():
            if attempt == 3 or call.method != "EndpointService.UpdateEndpoint":
                raise
            registry.send.backoff(attempt)
    if call.method == "EndpointService.DeployModel":
        registry.say(
            f"deploying {name}@{version} to {found.name}: it takes all the traffic "
            "when the deploy is done"
        )
    else:
        registry.say(f"{found.name}: all traffic to {name}@{version}")
    pinned = {v.version_id for v in registry.versions if PINNED_ALIAS in v.version_aliases}
    for version_id, undeploy in endpoint.retire_calls(found, name, version, pinned).items():
        registry.send(undeploy)
        registry.say(f"undeployed {name}@{version_id} from {found.name}")


def _step(where: str, what: str, step: Callable[[], Any]) -> Any:
    """Runs one step after the intent; a failure becomes one line saying what is half done."""
    from google.api_core import exceptions

    try:
        return step()
    except exceptions.GoogleAPIError as error:
        raise RegistryActionError(f"{where}: {what} failed ({error}); {HALF_DONE}") from None
    except RegistryActionError as error:  # says what failed already
        raise RegistryActionError(f"{error}; {HALF_DONE}") from None


def version_lines(versions: Sequence[gca.Model], now: float) -> list[str]:
    """A line per version: its aliases, why it is pinned or rolled back, an action on it."""
    lines = []
    for found in sorted(versions, key=lambda v: int(v.version_id)):
        marks = list(found.version_aliases)
        if is_rolled_back(found.labels) or PINNED_ALIAS in marks:
            marks.append(found.version_description)
        intent = Intent.found(found)
        if intent is not None and intent.lease().expired(now):
            marks.append(f"{intent.action} of {intent.when()} left half done")
        elif intent is not None:
            until = intent.lease().when()
            marks.append(f"{intent.action} by {intent.owner} in progress (lease until {until})")
        lines.append(f"{found.version_id}  {', '.join(marks)}")
    return lines
