"""Rollback, pin, unpin and restore on Vertex AI, through the Model Registry's aliases.

On Vertex the served model is the registry entry's version with the `default`
alias (what `model@default`, a deployment without a version, and our Pusher's
`is_default_version` all refer to). The local commands
(`serving_ops/local/folder.py`) move folders out of a highest-version
server's way; here the same meanings move aliases and labels, and nothing is
deleted:

- rollback moves `default` to the newest earlier version not rolled back and
  labels the version it left `tpu_pipeline_rolled_back` (reason in its version
  description), so the Pusher never makes it default or deploys it again.
- pin gives VERSION both `default` and `pinned` in one MergeVersionAliases
  call (an alias names one version of an entry, so there is never a second
  pin), restores VERSION if it was rolled back and labels every newer version
  rolled back, as the local pin sets them aside. While `pinned` stands the
  registry Pusher uploads, deploys and pushes nothing (`registry_refusal`).
- unpin removes the `pinned` alias; the versions the pin set aside stay aside.
- restore removes the rolled-back label; the version serves again (gets
  `default`) when it is newer than the one serving, as a restored newest
  folder does.

When `vertex.model_registry.endpoint_display_name` is set, the endpoint's
traffic follows the version that now serves (`serving_ops/vertex/endpoint.py`).
`serving_ops/vertex/actions.py` sends these requests (each label write as a
read-modify-write on the version's `etag`, `serving_ops/vertex/entry.py`), then
makes Vertex ML Metadata's blessings agree with what the registry set aside
(`serving_ops/vertex/baseline.py`), so the next run's baseline is what serves;
`finishing_change` is what is left to send of an action a stop left half done.
The manual blessing (`serving_ops/vertex/blessing.py`) builds on the same notes.
The requests are decided here from the versions as read, offline.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Sequence

from google.protobuf import field_mask_pb2

from tpu_pipeline.common import vertex_types as gca
from tpu_pipeline.common.config import ConfigError, PipelineConfig, require_vertex
from tpu_pipeline.common.vertex_api import ApiCall
from tpu_pipeline.serving_ops.protocol import operator_name
from tpu_pipeline.serving_ops.vertex.entry import (
    DEFAULT_ALIAS,
    PINNED_ALIAS,
    ROLLED_BACK_LABEL,
    RegistryActionError,
    aliases_call,
    is_rolled_back,
)

ACTIONS = ("rollback", "pin", "unpin", "restore")


@dataclasses.dataclass(frozen=True)
class RegistryChange:
    """The requests of one action, in order, and what serves after them.

    Attributes:
      calls: named steps, sent in order.
      serving: the version id that gets `default`, or None when the served
        version does not change (the endpoint's traffic follows it).
      summary: one line for the person who asked.
    """

    calls: dict[str, ApiCall]
    serving: str | None
    summary: str


def find_model_call(config: PipelineConfig) -> ApiCall:
    """ModelService.ListModels for the entry named `vertex.model_registry.model_display_name`."""
    registry = require_vertex(config).model_registry
    if registry is None:
        raise ConfigError(
            "vertex.model_registry: not set; name the registry entry to act on (model_display_name)"
        )
    return model_lookup_call(require_vertex(config).location, registry.model_display_name)


def model_lookup_call(location: str, display_name: str) -> ApiCall:
    """ModelService.ListModels for the entry named `display_name` in `location`."""
    request = gca.ListModelsRequest(parent=location, filter=f'display_name="{display_name}"')
    return ApiCall("ModelService.ListModels", request)


def served_version(versions: Sequence[gca.Model]) -> gca.Model | None:
    return _with_alias(versions, DEFAULT_ALIAS)


def pinned_version(versions: Sequence[gca.Model]) -> gca.Model | None:
    return _with_alias(versions, PINNED_ALIAS)


def _with_alias(versions: Sequence[gca.Model], alias: str) -> gca.Model | None:
    return next((v for v in versions if alias in v.version_aliases), None)


def registry_change(
    action: str,
    model_name: str,
    versions: Sequence[gca.Model],
    version: str | None = None,
    reason: str = "",
    now: datetime.datetime | None = None,
) -> RegistryChange:
    """What `action` sends to the entry `model_name`, decided from its `versions`.

    Raises:
      RegistryActionError: the action cannot be done (the message names the entry
        and the version, and what to do instead).
    """
    note = Note(now)
    if action == "unpin":
        pinned = pinned_version(versions)
        if pinned is None:
            return RegistryChange({}, None, f"{model_name}: nothing was pinned")
        return _unpin(model_name, pinned.version_id)
    if action == "rollback":
        return _rollback(model_name, versions, reason, note)
    target = _find(model_name, versions, version)
    if action == "pin":
        return _pin(model_name, versions, target, reason, note)
    return _restore(model_name, versions, target, note)


def _find(model_name: str, versions: Sequence[gca.Model], version: str | None) -> gca.Model:
    found = next((v for v in versions if v.version_id == version), None)
    if found is None:
        raise RegistryActionError(
            f"{model_name}: no version {version}; `tpu-pipeline serving list --vertex` shows them"
        )
    return found


def refuse_while_pinned(model_name: str, versions: Sequence[gca.Model], allowed: str = "") -> None:
    """Raises RegistryActionError when a version other than `allowed` has the `pinned` alias."""
    pinned = pinned_version(versions)
    if pinned is not None and pinned.version_id != allowed:
        raise RegistryActionError(
            f"{model_name}: serving is pinned to version {pinned.version_id}; "
            "`tpu-pipeline serving unpin --vertex` first"
        )


def _rollback(
    model_name: str, versions: Sequence[gca.Model], reason: str, note: Note
) -> RegistryChange:
    """Labels the default version rolled back, then moves `default` to the one before.

    The label first, so a crash after it leaves that version marked, never a second default.
    """
    refuse_while_pinned(model_name, versions)
    current = served_version(versions)
    if current is None:
        raise RegistryActionError(f"{model_name}: no version has the {DEFAULT_ALIAS} alias")
    earlier = [
        v
        for v in versions
        if int(v.version_id) < int(current.version_id) and not is_rolled_back(v.labels)
    ]
    if not earlier:
        raise RegistryActionError(
            f"{model_name}: version {current.version_id} is the only one not rolled back; "
            "nothing to roll back to"
        )
    previous = max(earlier, key=lambda v: int(v.version_id)).version_id
    return _rollback_calls(
        model_name, current.version_id, previous, dict(current.labels), reason, note
    )


def _rollback_calls(
    model_name: str, current: str, previous: str, labels: dict, reason: str, note: Note
) -> RegistryChange:
    """Labels `current` rolled back, then gives `default` to `previous`."""
    calls = {
        "label_rolled_back": note.set_aside(model_name, current, labels, reason),
        "move_default_alias": aliases_call(model_name, previous, [DEFAULT_ALIAS]),
    }
    summary = f"rolled back {model_name}@{current}; serving {previous} ({DEFAULT_ALIAS})"
    return RegistryChange(calls, previous, summary)


def _pin(
    model_name: str, versions: Sequence[gca.Model], target: gca.Model, reason: str, note: Note
) -> RegistryChange:
    """Labels each newer version rolled back, describes the pin, then moves both aliases."""
    refuse_while_pinned(model_name, versions, allowed=target.version_id)
    newer = sorted(
        (
            v
            for v in versions
            if int(v.version_id) > int(target.version_id) and not is_rolled_back(v.labels)
        ),
        key=lambda v: -int(v.version_id),  # newest first, as the local pin moves them
    )
    labels = {v.version_id: dict(v.labels) for v in newer}
    if is_rolled_back(target.labels):  # the local pin moves it back in place first
        labels[target.version_id] = dict(target.labels)
    return _pin_calls(
        model_name, target.version_id, [v.version_id for v in newer], labels, reason, note
    )


def _pin_calls(
    model_name: str,
    version: str,
    newer: list[str],
    labels: dict[str, dict],
    reason: str,
    note: Note,
) -> RegistryChange:
    """Requests of a pin; `labels` holds those of the versions to relabel (the pinned
    version only when it was rolled back)."""
    calls = {
        f"set_aside_{name}": note.set_aside(
            model_name, name, labels.get(name, {}), f"pinned to {version}: {reason}"
        )
        for name in newer
    }
    if version in labels:
        calls["remove_rolled_back_label"] = note.describe(
            model_name, version, "restored", labels=_without_rolled_back(labels[version])
        )
    calls["describe_pin"] = note.describe(model_name, version, "pinned", reason)
    calls["move_default_and_pinned_aliases"] = aliases_call(
        model_name, version, [DEFAULT_ALIAS, PINNED_ALIAS]
    )
    aside = f"; set aside {', '.join(newer)}" if newer else ""
    summary = (
        f"pinned {model_name}@{version}{aside}; runs push nothing until "
        "`tpu-pipeline serving unpin --vertex`"
    )
    return RegistryChange(calls, version, summary)


def _unpin(model_name: str, version: str) -> RegistryChange:
    """Removes the `pinned` alias; the pin's note stays in the version's description."""
    calls = {"remove_pinned_alias": aliases_call(model_name, version, [f"-{PINNED_ALIAS}"])}
    return RegistryChange(calls, None, f"unpinned {model_name}@{version}")


def _restore(
    model_name: str, versions: Sequence[gca.Model], target: gca.Model, note: Note
) -> RegistryChange:
    """Removes the rolled-back label; `default` moves to it when it is newer than the served one.

    Raises:
      RegistryActionError: the version is not rolled back, or a pin to an older one stands.
    """
    version = target.version_id
    if not is_rolled_back(target.labels):
        raise RegistryActionError(
            f"{model_name}: version {version} is not rolled back; "
            "`tpu-pipeline serving list --vertex` shows which are"
        )
    pinned = pinned_version(versions)
    if pinned is not None and int(version) > int(pinned.version_id):
        refuse_while_pinned(model_name, versions)  # it would serve over the pin
    current = served_version(versions)
    newer = current is None or int(version) > int(current.version_id)
    return _restore_calls(model_name, version, dict(target.labels), note, becomes_default=newer)


def _restore_calls(
    model_name: str, version: str, labels: dict, note: Note, becomes_default: bool
) -> RegistryChange:
    calls = {
        "remove_rolled_back_label": note.describe(
            model_name, version, "restored", labels=_without_rolled_back(labels)
        )
    }
    if not becomes_default:
        return RegistryChange(calls, None, f"restored {model_name}@{version}")
    calls["move_default_alias"] = aliases_call(model_name, version, [DEFAULT_ALIAS])
    return RegistryChange(calls, version, f"restored {model_name}@{version} (serving)")


def _without_rolled_back(labels: dict[str, str]) -> dict[str, str]:
    return {key: value for key, value in labels.items() if key != ROLLED_BACK_LABEL}


def finishing_change(
    action: str, model_name: str, versions: Sequence[gca.Model], version: str, serving: str | None
) -> RegistryChange:
    """The registry steps of `action` on `version` still to send, once it was left half done.

    Each step is sent only when the registry does not show it yet, so finishing twice
    changes nothing. `serving` is the version the action gives `default` (None: none).

    Raises:
      RegistryActionError: a pin to another version stands (a pin cannot be finished).
    """
    note = Note(None)
    target = _find(model_name, versions, version)
    if action == "pin":
        change = _pin(model_name, versions, target, "finishing an interrupted pin", note)
        if PINNED_ALIAS in target.version_aliases:
            del change.calls["describe_pin"]  # its note is there already
        return change
    calls = {}
    labels = dict(target.labels)
    if action == "rollback" and not is_rolled_back(labels):
        reason = "finishing an interrupted rollback"
        calls["label_rolled_back"] = note.set_aside(model_name, version, labels, reason)
    if action == "restore" and is_rolled_back(labels):
        calls["remove_rolled_back_label"] = note.describe(
            model_name, version, "restored", labels=_without_rolled_back(labels)
        )
    if (
        serving is not None
        and DEFAULT_ALIAS not in _find(model_name, versions, serving).version_aliases
    ):
        calls["move_default_alias"] = aliases_call(model_name, serving, [DEFAULT_ALIAS])
    summary = f"finished the {action} of {model_name}@{version}" + (
        f"; serving {serving} ({DEFAULT_ALIAS})" if serving else ""
    )
    return RegistryChange(calls, serving, summary)


class Note:
    """Version labels and descriptions that say what was done, when and by whom."""

    def __init__(self, now: datetime.datetime | None):
        self.now = now or datetime.datetime.now(datetime.timezone.utc)
        self.who = operator_name()

    def description(self, what: str, reason: str = "") -> str:
        """ "<what> <when> by <who>: <reason>", for a version's description."""
        when = self.now.isoformat(timespec="seconds")
        return f"{what} {when} by {self.who}" + (f": {reason}" if reason else "")

    def stamp(self) -> str:
        """When, as a label value (seconds since the epoch)."""
        return str(int(self.now.timestamp()))

    def describe(
        self,
        model_name: str,
        version: str,
        what: str,
        reason: str = "",
        labels: dict[str, str] | None = None,
    ) -> ApiCall:
        """UpdateModel of one version: a description of `what` was done, and its new `labels`.

        `labels` replace all the version's labels; None leaves them as they are.
        """
        model = gca.Model(
            name=f"{model_name}@{version}",
            labels=labels or {},
            version_description=self.description(what, reason),
        )
        paths = ["version_description"] if labels is None else ["labels", "version_description"]
        request = gca.UpdateModelRequest(
            model=model, update_mask=field_mask_pb2.FieldMask(paths=paths)
        )
        return ApiCall("ModelService.UpdateModel", request)

    def set_aside(self, model_name: str, version: str, labels: dict, reason: str) -> ApiCall:
        """Labels a version rolled back (the fingerprint label stays: the Pusher still knows it)."""
        marked = {**labels, ROLLED_BACK_LABEL: self.stamp()}
        return self.describe(model_name, version, "rolled back", reason, labels=marked)
