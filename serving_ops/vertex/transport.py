"""How the Vertex backend sends its calls: which are repeated, and the dry run's recorder.

Every call of the Vertex backend is an `ApiCall` (`common/vertex_api.py`) given to a
`Transport`, so the same action runs against Vertex AI, against a test's server, or
against the `Recorder` of a dry run.

What is repeated after a failure, and why (the API reference's own terms):

- Reads (`Get*`, `List*`, `Query*`) change nothing, so a read that meets an
  unavailable service, a deadline or a quota is sent again, with backoff.
- Changes carrying the `etag` read with the resource (UpdateModel, UpdateArtifact,
  UpdateEndpoint) are read-modify-writes (`serving_ops/vertex/entry.py`): a stale
  `etag` is refused (ABORTED or FAILED_PRECONDITION) and the write is decided again
  from a new read, as is one whose answer was lost, since the new read shows whether
  it landed. Only those callers repeat them.
- Everything else (an upload, an alias merge, a deploy, an undeploy, a created
  artifact) is sent once: repeated blindly it could upload twice or undo another
  actor's change. A failure leaves the action half done under its intent, and the
  actor that finishes it decides from a new read what is still to send.

A dry run is the real action over a `Recorder`: reads go to Vertex AI (they change
nothing), every change is recorded instead of sent and answered as the API would, and
later reads show what the recorded changes would have made. What it prints is the
calls the action makes, in order, each marked sent (a read of Vertex AI) or not (a
change, or a read of a version only the dry run's upload made).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import time
from collections.abc import Callable
from typing import Any

from tpu_pipeline.common import vertex_types as gca
from tpu_pipeline.common.vertex_api import ApiCall

Send = Callable[[ApiCall], Any]
READS = ("Get", "List", "Query")
READ_ATTEMPTS = 4
BACKOFF_S = 1.0


def _now() -> float:
    return time.time()


def _pause(seconds: float) -> None:
    time.sleep(seconds)


def is_read(call: ApiCall) -> bool:
    """Whether the call only reads (its method's name starts with Get, List or Query)."""
    return call.method.split(".")[1].startswith(READS)


def transient_errors() -> tuple[type[BaseException], ...]:
    """The API errors that say "not now" rather than "no"."""
    from google.api_core import exceptions

    return (
        exceptions.ServiceUnavailable,
        exceptions.DeadlineExceeded,
        exceptions.InternalServerError,
        exceptions.TooManyRequests,
    )


def conflict_errors() -> tuple[type[BaseException], ...]:
    """What the API answers a write whose `etag` is stale."""
    from google.api_core import exceptions

    return (exceptions.Aborted, exceptions.FailedPrecondition)


@dataclasses.dataclass
class Transport:
    """Sends calls; a read that meets a transient error is sent again with backoff.

    Attributes:
      send: makes one call (`tpu_pipeline.common.vertex_api.send` bound to a region and credentials,
        a test's server, or a `Recorder`).
      clock: seconds since the epoch, for leases (tests give their own).
      sleep: how backoff waits (tests give their own).
    """

    send_once: Send
    clock: Callable[[], float] = dataclasses.field(default=lambda: _now())
    sleep: Callable[[float], None] = dataclasses.field(default=lambda seconds: _pause(seconds))

    @classmethod
    def dry_run(cls, recorder: Recorder, **kwargs: Any) -> Transport:
        """A transport whose changes `recorder` records instead of sending."""
        return cls(recorder, **kwargs)

    @property
    def recorder(self) -> Recorder | None:
        return self.send_once if isinstance(self.send_once, Recorder) else None

    def step(self, name: str, run: Callable[[], str], **what: Any) -> str:
        """Runs a step that is no API call (the serving check), or, in a dry run, records it."""
        if self.recorder is not None:
            self.recorder.step(name, **what)
            return "not run: a dry run"
        return run()

    def __call__(self, call: ApiCall) -> Any:
        return self.send(call)

    def send(self, call: ApiCall) -> Any:
        if not is_read(call):
            return self.send_once(call)
        for attempt in range(READ_ATTEMPTS):
            try:
                return self.send_once(call)
            except transient_errors():
                if attempt == READ_ATTEMPTS - 1:
                    raise
                self.sleep(BACKOFF_S * 2**attempt)
        raise AssertionError("unreachable")

    def backoff(self, attempt: int) -> None:
        """Waits before deciding a refused or lost conditional write again."""
        self.sleep(BACKOFF_S * 2**attempt / 4)


@dataclasses.dataclass
class Recorded:
    """One call a dry run made: sent (a read) or recorded instead (a change)."""

    call: ApiCall
    sent: bool

    def to_dict(self) -> dict[str, Any]:
        return {**self.call.to_dict(), "sent": self.sent}


class Recorder:
    """The dry run's transport: sends reads, records changes and answers them as the API would.

    What a recorded change would have made shows in later reads of the registry's
    versions (their labels, descriptions and aliases, and a version an upload adds), so
    the action decides its next calls as it would for real. Non-API steps the action
    would take (the serving check) are recorded through `step`.
    """

    def __init__(self, send: Send):
        self._send = send
        self.calls: list[Recorded] = []
        self._changed: dict[str, gca.Model] = {}  # "<entry>@<id>" -> the version as changed
        self._uploaded: list[gca.Model] = []

    def __call__(self, call: ApiCall) -> Any:
        if not is_read(call):
            self.calls.append(Recorded(call, sent=False))
            return self._answer(call)
        local = self._known(call)
        self.calls.append(Recorded(call, sent=local is None))
        if local is not None:  # a version this dry run made up: Vertex AI has no such thing
            return local
        return self._overlaid(call, self._send(call))

    def step(self, name: str, **what: Any) -> None:
        """Records a step that is no API call (the serving check), in its place among the calls."""
        self.calls.append(Recorded(ApiCall(f"Step.{name}", _StepRequest(what)), sent=False))

    def printed(self) -> str:
        return json.dumps([recorded.to_dict() for recorded in self.calls], indent=2)

    def _overlaid(self, call: ApiCall, answer: Any) -> Any:
        """A read's answer with the recorded changes applied."""
        method = call.method.split(".")[1]
        if method == "ListModelVersions":
            made_up = [] if call.request.filter else self._uploaded
            return [self._changed.get(_versioned(v), v) for v in [*answer, *made_up]]
        if method == "GetModel":
            return self._changed.get(call.request.name, answer)
        return answer

    def _known(self, call: ApiCall) -> Any | None:
        """The answer to a read of what only this dry run made (an uploaded version)."""
        method, request = call.method.split(".")[1], call.request
        if method == "GetModel" and request.name in {_versioned(v) for v in self._uploaded}:
            return self._changed.get(request.name) or self._current(request.name)
        if method == "ListModelVersions" and request.name.startswith("<"):
            return self._overlaid(call, [])
        return None

    def _answer(self, call: ApiCall) -> Any:
        method, request = call.method.split(".")[1], call.request
        if method == "UpdateModel":
            return self._update(request)
        if method == "MergeVersionAliases":
            return self._merge(request.name, list(request.version_aliases))
        if method == "UploadModel":
            return _Done(self._upload(request))
        if method in ("CreateArtifact", "CreateExecution"):
            created = request.artifact if method == "CreateArtifact" else request.execution
            return type(created)(created, name=f"<the {created.schema_title} {method} creates>")
        return _Done(None)  # deploys and undeploys: an operation nobody waits for here

    def _update(self, request: Any) -> gca.Model:
        version = self._current(request.model.name)
        for path in request.update_mask.paths:
            setattr(version, path, getattr(request.model, path))
        version.etag = f"{version.etag}+dry-run"
        self._changed[request.model.name] = version
        return version

    def _merge(self, name: str, aliases: list[str]) -> gca.Model:
        entry = name.split("@")[0]
        for alias in aliases:
            bare = alias.lstrip("-")
            for other in self._versions_of(entry):
                if bare in other.version_aliases:
                    changed = self._current(_versioned(other))
                    changed.version_aliases = [a for a in changed.version_aliases if a != bare]
                    self._changed[_versioned(other)] = changed
            if not alias.startswith("-"):
                changed = self._current(name)
                changed.version_aliases = [*changed.version_aliases, bare]
                self._changed[name] = changed
        return self._changed.get(name)

    def _upload(self, request: Any) -> Any:
        entry = request.parent_model or "<the registry entry the upload creates>"
        version = gca.Model(request.model, name=entry, version_id="<the version it uploads>")
        aliases, version.version_aliases = list(version.version_aliases), []
        self._uploaded.append(version)
        self._merge(_versioned(version), aliases)
        return gca.UploadModelResponse(model=entry, model_version_id=version.version_id)

    def _current(self, name: str) -> gca.Model:
        if name in self._changed:
            return copy.deepcopy(self._changed[name])
        for uploaded in self._uploaded:
            if _versioned(uploaded) == name:
                return copy.deepcopy(uploaded)
        return copy.deepcopy(
            self._send(ApiCall("ModelService.GetModel", gca.GetModelRequest(name=name)))
        )

    def _versions_of(self, entry: str) -> list[gca.Model]:
        """The entry's versions as the recorded changes left them (unrecorded reads)."""
        listing = ApiCall(
            "ModelService.ListModelVersions", gca.ListModelVersionsRequest(name=entry)
        )
        listed = [] if entry.startswith("<") else list(self._send(listing))
        return self._overlaid(listing, listed)


def _versioned(version: gca.Model) -> str:
    return f"{version.name.split('@')[0]}@{version.version_id}"


@dataclasses.dataclass
class _Done:
    """A long-running operation the dry run answers as done."""

    response: Any

    def result(self, timeout: float | None = None) -> Any:
        return self.response


class _StepRequest(dict):
    """A non-API step's arguments, printed as a call's request is."""

    @staticmethod
    def to_json(request: dict) -> str:
        return json.dumps(request)
