"""The Model Registry entry an action works on, and the read-modify-writes of its versions.

On Vertex AI the served model is the entry's version with the `default` alias; a
version a person took out of service carries the label `tpu_pipeline_rolled_back`,
which keeps the Pusher from making it default or deploying it again, and a pinned
one the `pinned` alias.

An UpdateModel's labels replace all of a version's labels, so a write computed from a
read that another actor has changed since would drop what that actor set (that very
rolled-back label). So every label or description write here is a read-modify-write
on the version's `etag`, the API's own optimistic concurrency (`Model.etag`: "used to
perform consistent read-modify-write updates"): read the version (GetModel), apply
this action's change (the keys it sets or removes) to the labels read, send them with
the `etag` read; a stale `etag` is refused (ABORTED or FAILED_PRECONDITION) and the
write is decided again from a new read. The SDK's own `ModelRegistry.update_version`
sends the version it read, `etag` included, the same way.

Alias merges carry no `etag` (MergeVersionAliasesRequest has none): they are deltas the
API applies itself. One is sent once, after a read of the version shows it is still
wanted, and never gives `default` or `pinned` to a version labelled rolled back.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from google.protobuf import field_mask_pb2

from tpu_pipeline.common import vertex_types as gca
from tpu_pipeline.common.config import ModelRegistryConfig, PipelineConfig
from tpu_pipeline.common.vertex_api import ApiCall
from tpu_pipeline.components.serving.publish import model_fingerprint
from tpu_pipeline.serving_ops.protocol import OperationError
from tpu_pipeline.serving_ops.vertex.transport import Transport, conflict_errors, transient_errors

# Label keys and values allow lowercase letters, digits, '_' and '-', up to 63 characters.
FINGERPRINT_LABEL = "tpu_pipeline_fingerprint"
# Set by `tpu-pipeline serving rollback --vertex` (and pin, on the versions it sets aside).
ROLLED_BACK_LABEL = "tpu_pipeline_rolled_back"
# Set by `tpu-pipeline serving pin --vertex`: an alias names one version of an entry.
PINNED_ALIAS = "pinned"
DEFAULT_ALIAS = "default"
# How many times a conditional write is decided again after a stale `etag` or a lost answer.
WRITE_ATTEMPTS = 6

Say = Callable[[str], None]


class RegistryActionError(OperationError):
    """The action cannot be done on this registry entry (says which entry and version)."""


def is_rolled_back(labels: Any) -> bool:
    """Whether a version's labels say it was rolled back: never deployed again by a run."""
    return ROLLED_BACK_LABEL in dict(labels or {})


def fingerprint_label(model_dir: str) -> str:
    """A label value that names the SavedModel's content (its fingerprint, hashed)."""
    return hashlib.sha256(repr(model_fingerprint(model_dir)).encode()).hexdigest()[:32]


def list_versions_call(model_name: str) -> ApiCall:
    return ApiCall("ModelService.ListModelVersions", gca.ListModelVersionsRequest(name=model_name))


def get_model_call(name: str) -> ApiCall:
    """ModelService.GetModel of `<entry>@<version id>`: one version, with its `etag`."""
    return ApiCall("ModelService.GetModel", gca.GetModelRequest(name=name))


def update_call(
    name: str, etag: str, labels: dict[str, str] | None, description: str | None
) -> ApiCall:
    """UpdateModel of one version's labels and/or description, conditional on `etag`."""
    model = gca.Model(name=name, etag=etag, labels=labels or {})
    paths = []
    if labels is not None:
        paths.append("labels")
    if description is not None:
        model.version_description = description
        paths.append("version_description")
    request = gca.UpdateModelRequest(model=model, update_mask=field_mask_pb2.FieldMask(paths=paths))
    return ApiCall("ModelService.UpdateModel", request)


def aliases_call(model_name: str, version: str, aliases: list[str]) -> ApiCall:
    request = gca.MergeVersionAliasesRequest(
        name=f"{model_name}@{version}", version_aliases=aliases
    )
    return ApiCall("ModelService.MergeVersionAliases", request)


@dataclasses.dataclass(frozen=True)
class LabelChange:
    """What one write changes of a version: labels set, labels removed, the description."""

    set: dict[str, str] = dataclasses.field(default_factory=dict)
    removed: frozenset[str] = frozenset()
    description: str | None = None

    @classmethod
    def between(cls, before: dict[str, str], call: ApiCall) -> LabelChange:
        """The change an UpdateModel planned from `before` (a version's labels) makes."""
        request = call.request
        paths = set(request.update_mask.paths)
        description = request.model.version_description if "version_description" in paths else None
        if "labels" not in paths:
            return cls(description=description)
        after = dict(request.model.labels)
        return cls(
            {key: value for key, value in after.items() if before.get(key) != value},
            frozenset(set(before) - set(after)),
            description,
        )

    def applied(self, labels: dict[str, str]) -> dict[str, str]:
        kept = {key: value for key, value in labels.items() if key not in self.removed}
        return {**kept, **self.set}

    def touches_labels(self) -> bool:
        return bool(self.set or self.removed)


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
    send: Transport
    say: Say
    model_name: str | None
    versions: list[gca.Model]

    def reread(self) -> list[gca.Model]:
        self.versions = list(self.send(list_versions_call(self.model_name)))
        return self.versions

    def version(self, version_id: str) -> gca.Model:
        """The version as last read; RegistryActionError when the registry lists none such."""
        found = next((v for v in self.versions if v.version_id == version_id), None)
        if found is None:
            raise RegistryActionError(
                f"{self.model_name}: no version {version_id} in the registry's list"
            )
        return found

    def name_of(self, version_id: str) -> str:
        return f"{self.model_name}@{version_id}"

    def read(self, version_id: str) -> gca.Model:
        """The version as the registry holds it now (GetModel), `etag` included."""
        fresh = self.send(get_model_call(self.name_of(version_id)))
        self._keep(version_id, fresh)
        return fresh

    def update(
        self,
        version_id: str,
        change: LabelChange,
        expect: Callable[[gca.Model], None] | None = None,
    ) -> gca.Model:
        """Applies `change` to the version by a read-modify-write on its `etag`.

        Args:
          version_id: the version.
          change: the labels it sets and removes, and the description.
          expect: a precondition on the version as read; what it raises (Conflict,
            LostLease) stops the write.

        Returns:
          The version as written (or as read, when the change was there already).

        Raises:
          RegistryActionError: the version kept changing under this write.
        """
        name = self.name_of(version_id)
        for attempt in range(WRITE_ATTEMPTS):
            try:
                fresh = self.read(version_id)
            except transient_errors():
                self.send.backoff(attempt)
                continue
            if expect is not None:
                expect(fresh)
            labels = change.applied(dict(fresh.labels))
            wanted_labels = labels if change.touches_labels() else None
            if (wanted_labels is None or labels == dict(fresh.labels)) and (
                change.description is None or change.description == fresh.version_description
            ):
                return fresh
            call = update_call(name, fresh.etag, wanted_labels, change.description)
            try:
                written = self.send(call)
            except conflict_errors() + transient_errors():
                self.send.backoff(attempt)  # decided again from a new read: it may have landed
                continue
            self._keep(version_id, _version_of(written, fresh, call))
            return self.version(version_id)
        raise RegistryActionError(
            f"{name}: its labels kept changing under this command ({WRITE_ATTEMPTS} reads and "
            "writes); try again"
        )

    def merge_aliases(self, version_id: str, aliases: Sequence[str]) -> None:
        """Merges `aliases` into the version unless it has them already.

        Raises:
          RegistryActionError: the version is labelled rolled back and would serve.
        """
        fresh = self.read(version_id)
        added = [a for a in aliases if not a.startswith("-")]
        removed = [a[1:] for a in aliases if a.startswith("-")]
        held = set(fresh.version_aliases)
        if set(added) <= held and not set(removed) & held:
            return
        if {DEFAULT_ALIAS, PINNED_ALIAS} & set(added) and is_rolled_back(fresh.labels):
            raise RegistryActionError(
                f"{self.name_of(version_id)} is labelled rolled back ({ROLLED_BACK_LABEL}): "
                "it does not get `default`; `tpu-pipeline serving list --vertex` shows who "
                "changed it"
            )
        self.send(aliases_call(self.model_name, version_id, list(aliases)))

    def send_change(self, calls: Sequence[ApiCall]) -> None:
        """Sends an action's registry calls, each label write as a read-modify-write.

        Each UpdateModel was planned from the versions as last read; what it changes of
        them (the keys it sets and removes) is applied to a new read of the version.
        """
        planned_from = {v.version_id: dict(v.labels) for v in self.versions}
        for call in calls:
            if call.method == "ModelService.UpdateModel":
                version_id = call.request.model.name.split("@")[1]
                change = LabelChange.between(planned_from.get(version_id, {}), call)
                self.update(version_id, change)
            elif call.method == "ModelService.MergeVersionAliases":
                version_id = call.request.name.split("@")[1]
                self.merge_aliases(version_id, list(call.request.version_aliases))
            else:
                self.send(call)

    def _keep(self, version_id: str, version: Any) -> None:
        """Keeps the versions as last read in step with a version read or written."""
        if not isinstance(version, gca.Model):
            return
        if any(v.version_id == version_id for v in self.versions):
            self.versions = [version if v.version_id == version_id else v for v in self.versions]
        else:
            self.versions = [*self.versions, version]


def _version_of(written: Any, read: gca.Model, call: ApiCall) -> gca.Model:
    """The version after a write: the API's answer, or the read with the write applied."""
    if isinstance(written, type(read)) and written.version_id:
        return written
    after = type(read)(read)
    for path in call.request.update_mask.paths:
        setattr(after, path, getattr(call.request.model, path))
    return after
