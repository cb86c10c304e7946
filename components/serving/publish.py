"""Publishes a model folder as a served version: once per model, never half-written.

A model already served is recognised by its SavedModel fingerprint (which
covers the graph and the variables) and its TFLite files. A new one is
published so that a model server never loads part of it: on a local disk it is
copied into a hidden folder, synced and renamed into place (`common/atomic_folder.py`);
on an object store (gs://, s3://), where renaming a folder copies it object by object,
everything else is copied first and saved_model.pb last, since servers load a version
once that file is there. The TFLite variants (`tflite/`) are part of the model
folder, so they are published by the same copy, under the same version number.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import pathlib
import re
import time
from collections.abc import Callable
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory

from common import fileio, tfx_api
from common.atomic_file import is_remote
from common.atomic_folder import new_folder
from components.serving.measurements import TFLITE_DIR

_SAVED_MODEL_FILE = "saved_model.pb"
FINGERPRINT_FILE = "fingerprint.pb"


# The hashes of TensorFlow's FingerprintDef (tensorflow/core/protobuf/fingerprint.proto),
# by field number from 1, that name a SavedModel's content.
_FINGERPRINT_HASHES = (
    "saved_model_checksum",
    "graph_def_program_hash",
    "signature_def_hash",
    "saved_object_graph_hash",
    "checkpoint_hash",
)


@functools.cache
def _fingerprint_class() -> type[message.Message]:
    """FingerprintDef's hash fields as a protobuf message class of its own.

    TensorFlow's `fingerprint_pb2` imports all of TensorFlow (10-30 s and a screen of
    start-up lines), which rollback, pin and `serving list` must not pay to compare
    models. Its other fields (the version) are kept as unknown fields; the test checks
    the values against TensorFlow's own class.
    """
    file = descriptor_pb2.FileDescriptorProto(
        name="tpu_pipeline/saved_model_fingerprint.proto", package="tpu_pipeline", syntax="proto3"
    )
    fields = file.message_type.add(name="FingerprintDef")
    for number, name in enumerate(_FINGERPRINT_HASHES, start=1):
        fields.field.add(
            name=name,
            number=number,
            type=descriptor_pb2.FieldDescriptorProto.TYPE_UINT64,
            label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
        )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    descriptor = pool.FindMessageTypeByName("tpu_pipeline.FingerprintDef")
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)


@dataclasses.dataclass(frozen=True)
class PushResult:
    """Where the model is served from, and whether this push copied it there."""

    version_dir: str
    version: str
    newly_pushed: bool


def model_fingerprint(saved_model_dir: str) -> tuple[Any, ...]:
    """Identifies a model by its graph, signatures and variables, and its TFLite files.

    Read through `fileio`, like the copy itself, so it works wherever TFX can push.
    The TFLite files count (their conversion is deterministic), so the same
    SavedModel with another choice of variants is a new version; their
    measurements (timings differ run to run) do not.
    """
    with fileio.open(os.path.join(saved_model_dir, FINGERPRINT_FILE), "rb") as file:
        fingerprint = _fingerprint_class().FromString(file.read())
    tflite_dir = os.path.join(saved_model_dir, TFLITE_DIR)
    names = fileio.listdir(tflite_dir) if fileio.exists(tflite_dir) else []
    variants = sorted(os.path.join(tflite_dir, name) for name in names if name.endswith(".tflite"))
    return (
        *(getattr(fingerprint, name) for name in _FINGERPRINT_HASHES),
        tuple((os.path.basename(path), _file_digest(path)) for path in variants),
    )


def _file_digest(path: str) -> str:
    with fileio.open(path, "rb") as file:
        return hashlib.sha256(file.read()).hexdigest()


def _version_names(base_directory: str) -> list[str]:
    """Every version folder name (all digits, as TF Serving reads them), oldest first."""
    if not fileio.exists(base_directory):
        return []
    names = [name.rstrip("/") for name in fileio.listdir(base_directory)]
    return sorted((name for name in names if name.isdigit()), key=int)


def pushed_versions(base_directory: str) -> list[str]:
    """Versions that hold a whole model (their saved_model.pb is there), oldest first.

    A version folder without saved_model.pb is an object-store copy cut short:
    no server loads it, and it is not a pushed model.
    """
    return [
        name
        for name in _version_names(base_directory)
        if fileio.exists(os.path.join(base_directory, name, _SAVED_MODEL_FILE))
    ]


def push_model_version(
    model_dir: str,
    base_directory: str,
    clock: Callable[[], float] = time.time,
    before_publish: Callable[[str], None] | None = None,
) -> PushResult:
    """Publishes `model_dir` as a new version under `base_directory`, unless already there.

    The version number is the push time in seconds, or one more than the newest
    version if that is later, so versions always increase. `before_publish(model_dir)`
    runs only for a model not served yet, before anything is copied; what it
    raises stops the push.
    """
    fingerprint = model_fingerprint(model_dir)
    for version in pushed_versions(base_directory):
        version_dir = os.path.join(base_directory, version)
        if model_fingerprint(version_dir) == fingerprint:
            return PushResult(version_dir, version, newly_pushed=False)
    if before_publish is not None:
        before_publish(model_dir)
    names = _version_names(base_directory)
    version = str(max(int(clock()), int(names[-1]) + 1 if names else 0))
    version_dir = os.path.join(base_directory, version)
    if is_remote(base_directory):
        _copy_saved_model_last(model_dir, version_dir)
    else:
        _copy_and_rename(model_dir, version_dir)
    return PushResult(version_dir, version, newly_pushed=True)


def _copy_and_rename(model_dir: str, version_dir: str) -> None:
    """On a local disk: copy into a hidden folder servers ignore, then rename it into place."""
    with new_folder(pathlib.Path(version_dir)) as staging_dir:
        tfx_api.io_utils.copy_dir(model_dir, str(staging_dir))


def _copy_saved_model_last(model_dir: str, version_dir: str) -> None:
    """On an object store: everything else first, then saved_model.pb; a copy cut short goes."""
    saved_model = os.path.join(model_dir, _SAVED_MODEL_FILE)
    try:
        tfx_api.io_utils.copy_dir(
            model_dir, version_dir, deny_regex_patterns=[f"^{re.escape(saved_model)}$"]
        )
        fileio.copy(saved_model, os.path.join(version_dir, _SAVED_MODEL_FILE))
    except BaseException:  # an interrupt too: leave no folder a server could try to load
        if fileio.exists(version_dir):
            fileio.rmtree(version_dir)
        raise
