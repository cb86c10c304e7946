"""`serving bless --vertex`: a model the Evaluator refused becomes the served registry version.

Locally `serving bless` (serving_ops/local/blessing.py) finds the refused model in
ML Metadata, publishes it and records a ManualBlessing there. On Vertex the
served model is the registry entry's `default` version, so the person names the
model the Evaluator judged (`--model-uri gs://.../ServingPackager/served_model/<id>/Format-Serving`)
and it is uploaded as a new version with `default`, the fingerprint label the
Pusher recognises (a later run does not upload it again), the label
`tpu_pipeline_blessed_by_hand`, and who blessed it and why in its version
description. As locally, a pin is honoured and a rolled-back model is refused
(restore it instead); a model the registry holds already gets the note and
`default`. `serving_ops/vertex/actions.py` runs the serving check first, sends
these requests, then records the blessing in Vertex ML Metadata
(serving_ops/vertex/metadata_blessing.py), so the next Vertex run's baseline follows it.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Sequence

from pydantic import TypeAdapter, ValidationError

from tpu_pipeline.common import vertex_types as gca
from tpu_pipeline.common.config import GcsUri, ModelRegistryConfig
from tpu_pipeline.common.tfx_api import fileio
from tpu_pipeline.common.vertex_api import ApiCall
from tpu_pipeline.serving_ops.vertex.aliases import Note, RegistryChange, refuse_while_pinned
from tpu_pipeline.serving_ops.vertex.entry import (
    DEFAULT_ALIAS,
    FINGERPRINT_LABEL,
    RegistryActionError,
    aliases_call,
    fingerprint_label,
    is_rolled_back,
)

BLESSED_LABEL = "tpu_pipeline_blessed_by_hand"
BLESSED = "blessed by hand"


def model_label(model_uri: str) -> str:
    """The fingerprint label of the SavedModel at `model_uri` (read from Cloud Storage).

    Raises:
      RegistryActionError: not a gs:// URI, or no SavedModel fingerprint there.
    """
    check_model_uri(model_uri)
    if not fileio.exists(os.path.join(model_uri, "fingerprint.pb")):
        raise RegistryActionError(
            f"{model_uri}: no SavedModel fingerprint (fingerprint.pb); give the judged "
            "model's folder, .../ServingPackager/served_model/<id>/Format-Serving"
        )
    return fingerprint_label(model_uri)


def check_model_uri(model_uri: str) -> None:
    """Raises RegistryActionError unless `model_uri` is a gs:// URI (what a version serves from)."""
    try:
        TypeAdapter(GcsUri).validate_python(model_uri)
    except ValidationError:
        raise RegistryActionError(
            f"--model-uri {model_uri!r}: a registry version is served from Cloud Storage; "
            "give the gs:// URI of the Trainer's Format-Serving folder"
        ) from None


def bless_change(
    registry: ModelRegistryConfig,
    location: str,
    model_name: str | None,
    versions: Sequence[gca.Model],
    model_uri: str,
    fingerprint: str,
    reason: str,
    now: datetime.datetime | None = None,
) -> RegistryChange:
    """What blessing `model_uri` by hand sends to the entry `model_name` (None: none yet).

    Raises:
      RegistryActionError: a pin stands, or the model is a version rolled back.
    """
    note = Note(now)
    registered = next((v for v in versions if v.labels.get(FINGERPRINT_LABEL) == fingerprint), None)
    if registered is None:
        refuse_while_pinned(model_name, versions)
        upload = _upload_call(registry, location, model_name, model_uri, fingerprint, reason, note)
        return RegistryChange(
            {"upload": upload}, None, f"blessed {model_uri} by hand ({reason}); uploaded"
        )
    refuse_while_pinned(model_name, versions, allowed=registered.version_id)
    if is_rolled_back(registered.labels):
        raise RegistryActionError(
            f"{model_uri}: rolled back as {model_name}@{registered.version_id}; "
            f"`tpu-pipeline serving restore {registered.version_id} --vertex` to serve it again"
        )
    return _registered_calls(
        model_name, registered.version_id, dict(registered.labels), model_uri, reason, note
    )


def _upload_call(
    registry: ModelRegistryConfig,
    location: str,
    model_name: str | None,
    model_uri: str,
    fingerprint: str,
    reason: str,
    note: Note,
) -> ApiCall:
    """UploadModel as the Pusher uploads (aiplatform.Model.upload), plus the blessing's marks."""
    model = gca.Model(
        display_name=registry.model_display_name,
        artifact_uri=model_uri,
        container_spec=gca.ModelContainerSpec(image_uri=registry.serving_image),
        labels={FINGERPRINT_LABEL: fingerprint, BLESSED_LABEL: note.stamp()},
        version_aliases=[DEFAULT_ALIAS],
        version_description=note.description(BLESSED, reason),
    )
    request = gca.UploadModelRequest(parent=location, parent_model=model_name or "", model=model)
    return ApiCall("ModelService.UploadModel", request)


def _registered_calls(
    model_name: str, version: str, labels: dict, model_uri: str, reason: str, note: Note
) -> RegistryChange:
    """A version the registry holds: the blessing's label and note, then `default`."""
    marked = {**labels, BLESSED_LABEL: note.stamp()}
    calls = {
        "describe_blessing": note.describe(model_name, version, BLESSED, reason, labels=marked),
        "move_default_alias": aliases_call(model_name, version, [DEFAULT_ALIAS]),
    }
    summary = f"blessed {model_uri} by hand ({reason}); serving {model_name}@{version}"
    return RegistryChange(calls, version, summary)
