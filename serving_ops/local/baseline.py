"""Keeps the next run's baseline on what is served after a rollback, pin or restore.

TFX's baseline resolver takes the newest blessed Model, and reads LIVE
artifacts only (`channel_resolver` filters on the state). A rolled-back model
is still the newest blessed one, so the next run would be judged against the
model just taken out of service. This sets the blessings of every model whose
version is set aside to ABANDONED (with `withdrawn_by_rollback` naming the
version), and makes them LIVE again when the version is back in place.
Nothing is deleted, and a blessing the Evaluator refused stays as it was.

It reads the serving folder and makes MLMD agree with it, whatever happened
before, so running it again after a crash between the move and this is safe.
"""

from __future__ import annotations

import os
import pathlib

from ml_metadata.proto import metadata_store_pb2

from tpu_pipeline.components.serving.publish import model_fingerprint, pushed_versions
from tpu_pipeline.components.serving.versions import ROLLED_BACK_DIR, set_aside_versions
from tpu_pipeline.serving_ops.local.blessing import (
    artifacts_of_type,
    blessings_of,
    open_store,
    trainer_model_dir,
)

WITHDRAWN_PROPERTY = "withdrawn_by_rollback"


def follow_serving_folder(
    metadata_path: pathlib.Path, pipeline_name: str, serving_dir: str
) -> dict[str, list[int]]:
    """Withdraws the blessings of set-aside models, reinstates those back in place.

    Returns the blessing ids changed, under "withdrawn" and "reinstated".
    """
    changed: dict[str, list[int]] = {"withdrawn": [], "reinstated": []}
    if not metadata_path.exists():  # a serving folder fed by no local run
        return changed
    store = open_store(metadata_path)
    context = store.get_context_by_type_and_name("pipeline", pipeline_name)
    if context is None:
        return changed
    aside = {
        model_fingerprint(os.path.join(serving_dir, ROLLED_BACK_DIR, v)): v
        for v in set_aside_versions(serving_dir)
    }
    in_place = {
        model_fingerprint(os.path.join(serving_dir, v)) for v in pushed_versions(serving_dir)
    }
    updated = []
    for model in artifacts_of_type(store, context.id, "Model"):
        model_dir = trainer_model_dir(model)
        if not os.path.exists(os.path.join(model_dir, "fingerprint.pb")):
            continue  # a model whose files are gone cannot be served either way
        fingerprint = model_fingerprint(model_dir)
        for blessing in blessings_of(store, context.id, model.id):
            withdrawn = WITHDRAWN_PROPERTY in blessing.custom_properties
            if fingerprint in aside and fingerprint not in in_place and not withdrawn:
                blessing.state = metadata_store_pb2.Artifact.ABANDONED
                blessing.custom_properties[WITHDRAWN_PROPERTY].string_value = aside[fingerprint]
                changed["withdrawn"].append(blessing.id)
            elif withdrawn and fingerprint not in aside:
                blessing.state = metadata_store_pb2.Artifact.LIVE
                del blessing.custom_properties[WITHDRAWN_PROPERTY]
                changed["reinstated"].append(blessing.id)
            else:
                continue
            updated.append(blessing)
    if updated:
        store.put_artifacts(updated)
    return changed
