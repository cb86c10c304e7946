"""Which SavedModel a `--model` path means: a pushed version, or the newest of a folder's.

The Pusher publishes versions as integer folders under `<run>/serving_model/`
(TF Serving's layout, `components/serving/publish.py`); a server serves the
highest. `--model` takes a version folder itself, a `serving_model` folder, or a
run folder holding one, and the latter two mean the newest whole version, the
one a model server would serve.
"""

from __future__ import annotations

import json
import os
from typing import Any

from tensorflow.core.protobuf import saved_model_pb2

from tpu_pipeline.common import fileio
from tpu_pipeline.common.config import ConfigError, DatasetConfig
from tpu_pipeline.components.serving.export import (
    SERVED_DATASET_KEY,
    SERVING_INPUT_KEY,
    SERVING_OUTPUT_KEY,
    SERVING_SIGNATURE,
    TRAINING_INFO_PATH,
    served_fields,
)
from tpu_pipeline.components.serving.publish import pushed_versions

SAVED_MODEL_FILE = "saved_model.pb"
SERVING_MODEL_FOLDER = "serving_model"


def resolve_model_version(path: str) -> str:
    """The version folder `path` means: itself if it holds a SavedModel, else the newest version.

    Raises:
      ConfigError: `path` does not exist, or holds no SavedModel and no pushed version
        (directly or in its `serving_model/`); the message names the path.
    """
    path = path.rstrip("/") or "/"
    if not fileio.exists(path):
        raise ConfigError(f"--model {path}: no such folder")
    if fileio.exists(os.path.join(path, SAVED_MODEL_FILE)):
        return path
    for base in (path, os.path.join(path, SERVING_MODEL_FOLDER)):
        versions = pushed_versions(base)
        if versions:
            return os.path.join(base, versions[-1])
    raise ConfigError(
        f"--model {path}: holds no pushed model; give a version folder (with "
        f"{SAVED_MODEL_FILE}), a {SERVING_MODEL_FOLDER} folder of versions, or a run folder "
        f"holding {SERVING_MODEL_FOLDER}/"
    )


def served_class_count(version_dir: str) -> int:
    """How many classes `serving_default` scores, read from saved_model.pb (nothing loaded).

    Raises:
      ConfigError: the SavedModel has no `serving_default` taking serialized examples and
        returning probabilities, as `components/serving/export.py` writes it.
    """
    with fileio.open(os.path.join(version_dir, SAVED_MODEL_FILE), "rb") as handle:
        saved_model = saved_model_pb2.SavedModel.FromString(handle.read())
    for meta_graph in saved_model.meta_graphs:
        signature = meta_graph.signature_def.get(SERVING_SIGNATURE)
        if (
            signature is not None
            and SERVING_INPUT_KEY in signature.inputs
            and SERVING_OUTPUT_KEY in signature.outputs
        ):
            return signature.outputs[SERVING_OUTPUT_KEY].tensor_shape.dim[-1].size
    raise ConfigError(
        f"--model {version_dir}: has no {SERVING_SIGNATURE} signature taking "
        f"{SERVING_INPUT_KEY!r} (serialized tf.Examples) and returning {SERVING_OUTPUT_KEY!r}; "
        "is it a model this pipeline pushed?"
    )


def served_dataset(version_dir: str, configured: DatasetConfig) -> dict[str, Any]:
    """The dataset fields the model answers in (classes, image shape, features), as its
    Trainer recorded them; the `configured` dataset's for a model exported before they
    were kept."""
    path = os.path.join(version_dir, TRAINING_INFO_PATH)
    recorded = None
    if fileio.exists(path):
        with fileio.open(path) as handle:
            recorded = json.loads(handle.read()).get(SERVED_DATASET_KEY)
    return recorded or served_fields(configured)
