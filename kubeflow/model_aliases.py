"""Rollback on Vertex AI: the Model Registry's `default` alias moves to the previous version.

On Vertex the served model is the registry entry's version with the `default`
alias (what `model@default`, a deployment without a version, and our Pusher's
`is_default_version` all refer to). Rolling back moves that alias to the
newest earlier version not rolled back itself, and labels the version it left
(`tpu_pipeline_rolled_back`, with the reason in its version description), so
the Pusher never makes it default or deploys it again: a re-pushed model is
found by its fingerprint label and is not uploaded again. Nothing is deleted.
The requests are built here, offline, so `--dry-run` prints exactly what is sent.
An endpoint's traffic is not moved: redeploy `model@default` to follow the alias.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence

from google.cloud.aiplatform_v1 import types as gca
from google.protobuf import field_mask_pb2

from common.config import ConfigError, PipelineConfig
from components.serving.versions import operator_name
from kubeflow.model_registry import ROLLED_BACK_LABEL, is_rolled_back
from kubeflow.runner import require_vertex
from kubeflow.vertex_requests import ApiCall, parent

DEFAULT_ALIAS = "default"
# Stand-ins, in a dry run, for what only the lookups find.
FOUND_MODEL = "<name of the registry entry the lookup finds>"
FOUND_DEFAULT = "<its version with the default alias>"
FOUND_PREVIOUS = "<the newest earlier version not rolled back>"


class RollbackError(RuntimeError):
    """The registry entry has no version to roll back to (says which entry)."""


def find_model_call(config: PipelineConfig) -> ApiCall:
    """ModelService.ListModels for the entry named `vertex.model_registry.model_display_name`."""
    registry = require_vertex(config).model_registry
    if registry is None:
        raise ConfigError(
            "vertex.model_registry: not set; name the registry entry to roll back "
            "(model_display_name)"
        )
    name = registry.model_display_name
    request = gca.ListModelsRequest(parent=parent(config), filter=f'display_name="{name}"')
    return ApiCall("ModelService.ListModels", request)


def list_versions_call(model_name: str) -> ApiCall:
    return ApiCall("ModelService.ListModelVersions", gca.ListModelVersionsRequest(name=model_name))


def served_version(versions: Sequence[gca.Model]) -> gca.Model | None:
    return next((v for v in versions if DEFAULT_ALIAS in v.version_aliases), None)


def rollback_calls(
    model_name: str,
    versions: Sequence[gca.Model],
    reason: str,
    now: datetime.datetime | None = None,
) -> list[ApiCall]:
    """The requests that roll back the entry `model_name`, given its `versions`.

    First the label on the version being left (so a crash after it leaves that
    version marked, never a second default), then the alias move.

    Raises:
      RollbackError: no default version, or no earlier version to go back to.
    """
    current = served_version(versions)
    if current is None:
        raise RollbackError(f"{model_name}: no version has the {DEFAULT_ALIAS} alias")
    earlier = [
        v
        for v in versions
        if int(v.version_id) < int(current.version_id) and not is_rolled_back(v.labels)
    ]
    if not earlier:
        raise RollbackError(
            f"{model_name}: version {current.version_id} is the only one not rolled back; "
            "nothing to roll back to"
        )
    previous = max(earlier, key=lambda v: int(v.version_id))
    return _calls(
        model_name, current.version_id, previous.version_id, dict(current.labels), reason, now
    )


def planned_rollback_calls(config: PipelineConfig, reason: str) -> dict[str, ApiCall]:
    """What a real rollback sends, in order, with stand-ins for what the lookups find."""
    calls = _calls(FOUND_MODEL, FOUND_DEFAULT, FOUND_PREVIOUS, {}, reason, None)
    return {
        "lookup": find_model_call(config),
        "versions": list_versions_call(FOUND_MODEL),
        "label_rolled_back": calls[0],
        "move_default_alias": calls[1],
    }


def _calls(
    model_name: str,
    current: str,
    previous: str,
    labels: dict[str, str],
    reason: str,
    now: datetime.datetime | None,
) -> list[ApiCall]:
    now = now or datetime.datetime.now(datetime.timezone.utc)
    who = operator_name()
    rolled_back = gca.Model(
        name=f"{model_name}@{current}",
        labels={**labels, ROLLED_BACK_LABEL: str(int(now.timestamp()))},
        version_description=f"rolled back {now.isoformat(timespec='seconds')} by {who}: {reason}",
    )
    label = gca.UpdateModelRequest(
        model=rolled_back,
        update_mask=field_mask_pb2.FieldMask(paths=["labels", "version_description"]),
    )
    move = gca.MergeVersionAliasesRequest(
        name=f"{model_name}@{previous}", version_aliases=[DEFAULT_ALIAS]
    )
    return [
        ApiCall("ModelService.UpdateModel", label),
        ApiCall("ModelService.MergeVersionAliases", move),
    ]
