"""Publishes a model folder as a served version: once per model, never half-written.

A model already served is recognised by its SavedModel fingerprint (which
covers the graph and the variables) and its TFLite files. A new one is
published so that a model server never loads part of it: on a local disk it is
copied into a hidden folder, synced and renamed into place (`common/atomic_folder.py`);
on an object store (gs://, s3://), where renaming a folder copies it object by object,
everything else is copied first and saved_model.pb last, since servers load a version
once that file is there. The TFLite variants (`tflite/`) are part of the model
folder, so they are published by the same copy, under the same version number.

Two pushes may pick the same number (the same second, or listings read before either
copied). Locally the serving folder's lock and a rename that refuses an existing folder
keep them apart. On Cloud Storage each push first claims its number: an object
`.versions/<number>` created only if absent (`common/gcs_objects.py`), so of two
claimers exactly one wins and the other takes the next number; the claim goes once the
version's saved_model.pb is there (the folder then holds the number). A copy that
fails removes only the objects it wrote itself, then its claim; a copy cut short by a
killed process leaves its claim, so the number is never handed out again.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import hashlib
import json
import os
import pathlib
import posixpath
import socket
import time
from collections.abc import Callable
from typing import Any

from absl import logging
from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory

from tpu_pipeline.common import fileio, gcs_objects, tfx_api
from tpu_pipeline.common.atomic_file import is_remote
from tpu_pipeline.common.atomic_folder import new_folder
from tpu_pipeline.components.serving.measurements import TFLITE_DIR

_SAVED_MODEL_FILE = "saved_model.pb"
FINGERPRINT_FILE = "fingerprint.pb"
# Where a push to Cloud Storage claims its version number while it copies (a hidden
# folder: servers read only all-digit names).
CLAIMS_DIR = ".versions"


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
    before_copy: Callable[[PushResult], None] | None = None,
) -> PushResult:
    """Publishes `model_dir` as a new version under `base_directory`, unless already there.

    The version number is the push time in seconds, or one more than the newest
    version if that is later, so versions always increase. `before_publish(model_dir)`
    runs only for a model not served yet, before anything is copied; what it
    raises stops the push. `before_copy(result)` then runs with the version it is
    about to become (claimed, on Cloud Storage); what it raises stops the push too,
    with nothing copied and the claim given back.
    """
    fingerprint = model_fingerprint(model_dir)
    for version in pushed_versions(base_directory):
        version_dir = os.path.join(base_directory, version)
        if model_fingerprint(version_dir) == fingerprint:
            return PushResult(version_dir, version, newly_pushed=False)
    if before_publish is not None:
        before_publish(model_dir)
    names = _version_names(base_directory)
    version = max(int(clock()), int(names[-1]) + 1 if names else 0)
    if not gcs_objects.is_gcs(base_directory):
        result = PushResult(os.path.join(base_directory, str(version)), str(version), True)
        if before_copy is not None:
            before_copy(result)
        if is_remote(base_directory):
            _copy_saved_model_last(model_dir, result.version_dir)
        else:
            _copy_and_rename(model_dir, result.version_dir)
        return result
    version, claim = _claim_version(base_directory, version)
    result = PushResult(posixpath.join(base_directory, str(version)), str(version), True)
    try:
        if before_copy is not None:
            before_copy(result)
        _copy_saved_model_last(model_dir, result.version_dir)
    except BaseException:
        gcs_objects.delete(_claim_uri(base_directory, version), claim)
        raise
    gcs_objects.delete(_claim_uri(base_directory, version), claim)
    return result


def _claim_uri(base_directory: str, version: int) -> str:
    return posixpath.join(base_directory, CLAIMS_DIR, str(version))


def _claim_version(base_directory: str, first: int) -> tuple[int, int]:
    """Claims the first free number from `first` on; (the number, the claim's generation).

    A number is free when this push creates its claim object and no folder holds it: a
    claim made just after another push published that number and gave its claim back
    is returned at once.
    """
    claimed = _claimed_numbers(base_directory)
    version = max([first, *(number + 1 for number in claimed)])
    who = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "when": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
    }
    while True:
        uri = _claim_uri(base_directory, version)
        generation = gcs_objects.create(uri, json.dumps(who))
        if generation is not None:
            if not fileio.exists(posixpath.join(base_directory, str(version))):
                return version, generation
            gcs_objects.delete(uri, generation)
        version += 1


def _claimed_numbers(base_directory: str) -> list[int]:
    """The numbers claimed by pushes copying now (or cut short), from the claims' folder."""
    claims_dir = posixpath.join(base_directory, CLAIMS_DIR)
    if not fileio.exists(claims_dir):
        return []
    names = (name.rstrip("/") for name in fileio.listdir(claims_dir))
    return [int(name) for name in names if name.isdigit()]


def _copy_and_rename(model_dir: str, version_dir: str) -> None:
    """On a local disk: copy into a hidden folder servers ignore, then rename it into place."""
    with new_folder(pathlib.Path(version_dir)) as staging_dir:
        tfx_api.io_utils.copy_dir(model_dir, str(staging_dir))


def _copy_saved_model_last(model_dir: str, version_dir: str) -> None:
    """On an object store: everything else first, then saved_model.pb, never over an object
    that is there. A copy cut short removes the objects it wrote, and only those: another
    writer's in the same folder stay."""
    sources = []
    for folder, _, names in fileio.walk(model_dir):
        sources += [os.path.join(folder, name) for name in names]
    saved_model = os.path.join(model_dir, _SAVED_MODEL_FILE)
    sources = sorted(source for source in sources if source != saved_model) + [saved_model]
    written: list[str] = []
    try:
        for source in sources:
            target = posixpath.join(version_dir, os.path.relpath(source, model_dir))
            fileio.copy(source, target, overwrite=False)
            written.append(target)
    except BaseException:  # an interrupt too: leave no file a server could try to load
        for target in reversed(written):
            try:
                fileio.remove(target)
            except Exception as error:  # noqa: BLE001 (say, and raise what cut the copy)
                logging.warning("Could not remove %s after a failed copy: %s", target, error)
        raise
