"""A Pusher that publishes each blessed model once, atomically.

TFX's own Pusher copies file by file into the final version folder and names
the version by the clock, so a model server can see a half-copied version, and
a cached rerun (the same model, blessed again against itself) pushes a second
copy. This executor copies into a hidden staging folder and renames it into
place, and recognises a model it already pushed by its SavedModel fingerprint
(which covers the graph and the variables).
"""

from __future__ import annotations

import dataclasses
import os
import time
import uuid
from collections.abc import Callable
from typing import Any

import tensorflow as tf
from absl import logging

from common.tfx_api import (
    artifact_utils,
    fileio,
    io_utils,
    proto_utils,
    pusher_pb2,
    standard_component_specs,
    tfx_pusher_executor,
)

ALREADY_PUSHED_PROPERTY = "already_pushed"
_STAGING_PREFIX = ".staging-"


@dataclasses.dataclass(frozen=True)
class PushResult:
    """Where the model is served from, and whether this push copied it there."""

    version_dir: str
    version: str
    newly_pushed: bool


def model_fingerprint(saved_model_dir: str) -> tuple[int, ...]:
    """Identifies a SavedModel by its graph, signatures and variables."""
    fingerprint = tf.saved_model.experimental.read_fingerprint(saved_model_dir)
    return (
        fingerprint.saved_model_checksum,
        fingerprint.graph_def_program_hash,
        fingerprint.signature_def_hash,
        fingerprint.saved_object_graph_hash,
        fingerprint.checkpoint_hash,
    )


def pushed_versions(base_directory: str) -> list[str]:
    """Version folders (all-digit names, as TF Serving reads them), oldest first."""
    if not fileio.exists(base_directory):
        return []
    names = [name.rstrip("/") for name in fileio.listdir(base_directory)]
    return sorted((name for name in names if name.isdigit()), key=int)


def push_model_version(
    model_dir: str, base_directory: str, clock: Callable[[], float] = time.time
) -> PushResult:
    """Publishes `model_dir` as a new version under `base_directory`, unless already there.

    The version number is the push time in seconds, or one more than the newest
    version if that is later, so versions always increase. The copy lands in a
    staging folder that model servers ignore and is renamed into place whole.
    """
    fingerprint = model_fingerprint(model_dir)
    versions = pushed_versions(base_directory)
    for version in versions:
        version_dir = os.path.join(base_directory, version)
        if model_fingerprint(version_dir) == fingerprint:
            return PushResult(version_dir, version, newly_pushed=False)
    version = str(max(int(clock()), int(versions[-1]) + 1 if versions else 0))
    staging_dir = os.path.join(base_directory, f"{_STAGING_PREFIX}{version}-{uuid.uuid4().hex}")
    version_dir = os.path.join(base_directory, version)
    try:
        io_utils.copy_dir(model_dir, staging_dir)
        fileio.rename(staging_dir, version_dir)
    finally:
        if fileio.exists(staging_dir):
            fileio.rmtree(staging_dir)
    return PushResult(version_dir, version, newly_pushed=True)


class AtomicPusherExecutor(tfx_pusher_executor.Executor):
    """TFX Pusher executor that pushes blessed models atomically and only once."""

    def Do(
        self,
        input_dict: dict[str, list[Any]],
        output_dict: dict[str, list[Any]],
        exec_properties: dict[str, Any],
    ) -> None:
        pushed_model = artifact_utils.get_single_instance(
            output_dict[standard_component_specs.PUSHED_MODEL_KEY]
        )
        if not self.CheckBlessing(input_dict):
            self._MarkNotPushed(pushed_model)
            return
        destination = pusher_pb2.PushDestination()
        proto_utils.json_to_proto(
            exec_properties[standard_component_specs.PUSH_DESTINATION_KEY], destination
        )
        if destination.WhichOneof("destination") != "filesystem":
            raise ValueError("AtomicPusherExecutor pushes to a filesystem destination only")
        result = push_model_version(
            self.GetModelPath(input_dict), destination.filesystem.base_directory
        )
        if result.newly_pushed:
            logging.info("Model pushed as version %s: %s", result.version, result.version_dir)
        else:
            logging.info("Model already served as version %s; not pushed again", result.version)
        self._MarkPushed(
            pushed_model, pushed_destination=result.version_dir, pushed_version=result.version
        )
        pushed_model.set_int_custom_property(ALREADY_PUSHED_PROPERTY, int(not result.newly_pushed))
