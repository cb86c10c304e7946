"""The Pusher TFX runs: TFX's own, with an executor that publishes atomically and once.

TFX's Pusher names each version by the clock, so a cached rerun (the same
model, blessed again against itself) pushes a second copy. This executor
publishes through `components/serving/publish.py`, which recognises a model
already served and never leaves a version half-written. Before a new version is
published, a model server loads the candidate and answers its warmup requests
through every signature (`components/serving/server_check.py`); a candidate that
fails is not pushed and the Pusher fails. The PushedModel records how the check
went and which server ran it. A Pusher that publishes elsewhere too
(kubeflow/model_registry.py) runs the same check through `check_serving`.
TFX names the executor by this module's path in compiled pipelines, so it stays here.
"""

from __future__ import annotations

import json
from typing import Any

from absl import logging

from common.interrupts import raise_if_interrupted
from common.tfx_api import (
    Pusher,
    artifact_utils,
    executor_spec,
    proto_utils,
    pusher_pb2,
    standard_component_specs,
    tfx_pusher_executor,
)
from components.contract import read_dataset, read_serving
from components.serving.publish import push_model_version
from components.serving.server_check import ServingCheckResult, check_model
from components.serving.versions import push_refusal, serving_lock

ALREADY_PUSHED_PROPERTY = "already_pushed"
# Why a blessed model was not published (a pin, or the model was rolled back).
PUSH_REFUSED_PROPERTY = "push_refused"
# How the serving check went, in words: "passed (serving_default, images, pixels in
# 0.3 s; model_server.py up in 29.6 s)", or why it did not run.
SERVING_CHECK_PROPERTY = "serving_check"
# Which server ran it: "tensorflow_model_server", or "model_server.py" where that is not on PATH.
SERVING_CHECK_SERVER_PROPERTY = "serving_check_server"


class AtomicPusherExecutor(tfx_pusher_executor.Executor):
    """TFX Pusher executor that pushes blessed models atomically and only once."""

    # The check this execution ran, if any (TFX makes an executor per execution).
    _serving_check: ServingCheckResult | None = None

    def Do(
        self,
        input_dict: dict[str, list[Any]],
        output_dict: dict[str, list[Any]],
        exec_properties: dict[str, Any],
    ) -> None:
        pushed_model = artifact_utils.get_single_instance(
            output_dict[standard_component_specs.PUSHED_MODEL_KEY]
        )
        # An interrupt that some library swallowed on its way up must still stop the push.
        raise_if_interrupted("the push")
        if not self.CheckBlessing(input_dict):
            self._MarkNotPushed(pushed_model)
            return
        destination = pusher_pb2.PushDestination()
        proto_utils.json_to_proto(
            exec_properties[standard_component_specs.PUSH_DESTINATION_KEY], destination
        )
        if destination.WhichOneof("destination") != "filesystem":
            raise ValueError("AtomicPusherExecutor pushes to a filesystem destination only")
        custom_config = json.loads(exec_properties[standard_component_specs.CUSTOM_CONFIG_KEY])

        def check_first(model_dir: str) -> None:
            self.check_serving(model_dir, custom_config, pushed_model)

        base_directory = destination.filesystem.base_directory
        with serving_lock(base_directory):  # rollback and pin take turns with the push
            if self._refuse_push(input_dict, base_directory, pushed_model, custom_config):
                return
            result = push_model_version(
                self.GetModelPath(input_dict), base_directory, before_publish=check_first
            )
        if result.newly_pushed:
            logging.info("Model pushed as version %s: %s", result.version, result.version_dir)
        else:
            logging.info("Model already served as version %s; not pushed again", result.version)
        self._MarkPushed(
            pushed_model, pushed_destination=result.version_dir, pushed_version=result.version
        )
        pushed_model.set_int_custom_property(ALREADY_PUSHED_PROPERTY, int(not result.newly_pushed))
        if self._serving_check is None:
            pushed_model.set_string_custom_property(
                SERVING_CHECK_PROPERTY, "not run: the model is already served"
            )

    def check_serving(
        self, model_dir: str, custom_config: dict[str, Any], pushed_model: Any
    ) -> None:
        """Runs the serving check on `model_dir` with the run's budget, once per execution,
        and records it on `pushed_model`; a failed check raises ServingCheckError.

        Args:
          model_dir: the model to check (the candidate, or the copy about to be published).
          custom_config: the Pusher's, with the check's sections
            (`components.contract.pusher_sections`).
          pushed_model: the PushedModel artifact that records the check.
        """
        if self._serving_check is not None:
            return
        self._serving_check = check_model(
            model_dir,
            read_dataset(custom_config).num_classes,
            read_serving(custom_config).check_timeout_seconds,
        )
        logging.info("Serving check %s", self._serving_check.to_text())
        pushed_model.set_string_custom_property(
            SERVING_CHECK_PROPERTY, self._serving_check.to_text()
        )
        pushed_model.set_string_custom_property(
            SERVING_CHECK_SERVER_PROPERTY, self._serving_check.server
        )

    def _refuse_push(
        self,
        input_dict: dict[str, list[Any]],
        base_directory: str,
        pushed_model: Any,
        custom_config: dict[str, Any],
    ) -> bool:
        """Marks the model not pushed when a pin stands or it was rolled back before."""
        refusal = self._push_refusal(self.GetModelPath(input_dict), base_directory, custom_config)
        if refusal is None:
            return False
        logging.warning("Blessed model not pushed: %s", refusal)
        self._MarkNotPushed(pushed_model)
        pushed_model.set_string_custom_property(PUSH_REFUSED_PROPERTY, refusal)
        return True

    def _push_refusal(
        self, model_dir: str, base_directory: str, custom_config: dict[str, Any]
    ) -> str | None:
        """Why not to push `model_dir` (the serving folder's pin or set-aside versions), or None.

        A Pusher that serves from elsewhere too (kubeflow/model_registry.py) adds its own reasons.
        """
        del custom_config  # the serving folder says it all here
        return push_refusal(model_dir, base_directory)


class AtomicPusher(Pusher):
    """TFX's Pusher with an executor that pushes atomically and never twice."""

    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(AtomicPusherExecutor)
