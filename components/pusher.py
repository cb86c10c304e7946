"""The Pusher TFX runs: TFX's own, with an executor that publishes atomically and once.

TFX's Pusher names each version by the clock, so a cached rerun (the same
model, blessed again against itself) pushes a second copy. This executor
publishes through `components/serving/publish.py`, which recognises a model
already served and never leaves a version half-written. Before a new version is
published, a model server loads the candidate and answers its warmup requests
through every signature (`components/serving/server_check.py`); a candidate that
fails is not pushed and the Pusher fails. The PushedModel records how the check
went and which server ran it. Each version it publishes gets a model card in its folder
(`components/model_card/`), made from the Evaluator's evaluation and blessing and
StatisticsGen's statistics, two inputs TFX's own Pusher does not take; the PushedModel
records where (`model_card`). With `drift.block_push`, the SpanShiftGate's verdict is a
third input (`span_shift`): a span whose images moved from the served model's is not
pushed (the Evaluator refused its model for it too), and `push_refused` says why
(`components/span_shift_gate.py`). A Pusher that
publishes elsewhere too (serving_ops/vertex/pusher.py) runs the same check through
`check_serving`, honours the same verdict, and is asked before a new version is copied
(`_before_copy`), so its refusal leaves nothing served.
The warmup requests are the ServingPackager's (`serving.package`); with that step left
out the Pusher takes the Trainer's SavedModel and ExampleGen's examples, and checks and
publishes a copy of the model with warmup requests made from the eval split.
TFX names the executor by this module's path in compiled pipelines, so it stays here.
"""

from __future__ import annotations

import json
import os
from typing import Any

from absl import logging

from tpu_pipeline.common import fileio
from tpu_pipeline.common.interrupts import raise_if_interrupted
from tpu_pipeline.common.tfx_api import (
    BaseComponent,
    Channel,
    ChannelParameter,
    Pusher,
    artifact_utils,
    executor_spec,
    io_utils,
    json_utils,
    proto_utils,
    pusher_pb2,
    standard_artifacts,
    standard_component_specs,
    tfx_pusher_executor,
)
from tpu_pipeline.components.contract import read_dataset, read_evaluator, read_serving
from tpu_pipeline.components.model_card import card, facts
from tpu_pipeline.components.model_card.write import write_model_card
from tpu_pipeline.components.packager import split_files
from tpu_pipeline.components.serving.publish import PushResult, push_model_version
from tpu_pipeline.components.serving.server_check import ServingCheckResult, check_model
from tpu_pipeline.components.serving.versions import push_refusal, serving_lock
from tpu_pipeline.components.serving.warmup import WARMUP_FILE, write_warmup_requests
from tpu_pipeline.components.span_shift_gate import SPAN_SHIFT_KEY, push_hold

ALREADY_PUSHED_PROPERTY = "already_pushed"
# Why a blessed model was not published (a pin, the model was rolled back, or the span
# shift gate held it back).
PUSH_REFUSED_PROPERTY = "push_refused"
# How the serving check went, in words: "passed (serving_default, images, pixels in
# 0.3 s; model_server.py up in 29.6 s)", or why it did not run.
SERVING_CHECK_PROPERTY = "serving_check"
# Which server ran it: "tensorflow_model_server", or "model_server.py" where that is not on PATH.
SERVING_CHECK_SERVER_PROPERTY = "serving_check_server"
# Where the pushed version's model_card.json is (its model_card.html lies beside it).
MODEL_CARD_PROPERTY = "model_card"
# Why the published version has no card (the push stands without one).
MODEL_CARD_ERROR_PROPERTY = "model_card_error"
EVALUATION_KEY = standard_component_specs.EVALUATION_KEY
STATISTICS_KEY = standard_component_specs.STATISTICS_KEY
EXAMPLES_KEY = standard_component_specs.EXAMPLES_KEY
# In the PushedModel's folder: the Trainer's model with warmup requests, when no
# ServingPackager made them (`serving.package: false`).
SERVABLE_COPY_DIR = "servable_model"


class PushRefused(Exception):
    """Where else the model is published refused it before its copy: why, in one line."""


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
        # A held-back span first: the Evaluator refused the model for it too, and this says why.
        verdicts = input_dict.get(SPAN_SHIFT_KEY) or []
        hold = push_hold(verdicts[0].read()) if verdicts else None
        if hold is not None:
            logging.warning("Model not pushed: %s", hold)
            self._MarkNotPushed(pushed_model)
            pushed_model.set_string_custom_property(PUSH_REFUSED_PROPERTY, hold)
            return
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

        def accept_first(target: PushResult) -> None:
            self._before_copy(input_dict, custom_config, pushed_model, target)

        base_directory = destination.filesystem.base_directory
        model_dir = self._servable_model(input_dict, custom_config, pushed_model)
        with serving_lock(base_directory):  # rollback and pin take turns with the push
            if self._refuse_push(input_dict, base_directory, pushed_model, custom_config):
                return
            try:
                result = push_model_version(
                    model_dir,
                    base_directory,
                    before_publish=check_first,
                    before_copy=accept_first,
                )
            except PushRefused as refused:  # nothing was copied
                self._mark_refused(pushed_model, str(refused))
                return
            try:
                card_path = self._write_model_card(
                    input_dict, custom_config, result.version, result.version_dir
                )
            except Exception as error:  # noqa: BLE001 (the version is published: say, go on)
                card_path = None
                logging.warning("No model card for version %s: %s", result.version, error)
                pushed_model.set_string_custom_property(
                    MODEL_CARD_ERROR_PROPERTY, f"{type(error).__name__}: {error}"
                )
        if card_path is not None:
            pushed_model.set_string_custom_property(MODEL_CARD_PROPERTY, card_path)
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

    def _servable_model(
        self, input_dict: dict[str, list[Any]], custom_config: dict[str, Any], pushed_model: Any
    ) -> str:
        """The model to check and publish: the one given, or, given ExampleGen's examples
        for a model without warmup requests (the Trainer's, with no ServingPackager), a
        copy of it with warmup requests from the eval split, in the PushedModel's folder."""
        model_dir = self.GetModelPath(input_dict)
        examples = input_dict.get(EXAMPLES_KEY) or []
        if not examples or fileio.exists(os.path.join(model_dir, WARMUP_FILE)):
            return model_dir
        servable = os.path.join(pushed_model.uri, SERVABLE_COPY_DIR)
        io_utils.copy_dir(model_dir, servable)
        write_warmup_requests(
            servable, split_files(examples[0], "eval"), read_dataset(custom_config)
        )
        return servable

    def check_serving(
        self, model_dir: str, custom_config: dict[str, Any], pushed_model: Any
    ) -> None:
        """Runs the serving check on `model_dir` with the run's budget, once per execution,
        and records it on `pushed_model`; a failed check raises ServingCheckError.

        Args:
          model_dir: the model to check (the candidate, or the copy about to be published).
          custom_config: the Pusher's, with the check's sections
            (`tpu_pipeline.components.contract.pusher_sections`).
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

    def _before_copy(
        self,
        input_dict: dict[str, list[Any]],
        custom_config: dict[str, Any],
        pushed_model: Any,
        target: PushResult,
    ) -> None:
        """Runs when a new version is about to be copied into the serving folder as `target`.

        Nothing to do here; a Pusher that publishes elsewhere too (serving_ops/vertex/pusher.py)
        asks there first, and raises PushRefused so that a refusal leaves nothing served.
        """
        del input_dict, custom_config, pushed_model, target

    def _model_card(
        self,
        input_dict: dict[str, list[Any]],
        custom_config: dict[str, Any],
        version: str,
        version_dir: str,
    ) -> dict[str, Any] | None:
        """The model card of `version` (to be) at `version_dir`, or None where the Pusher
        was not given the evaluation to make it from."""
        evaluations = input_dict.get(EVALUATION_KEY) or []
        if not evaluations:
            return None
        statistics = input_dict.get(STATISTICS_KEY) or [None]
        blessing = artifact_utils.get_single_instance(
            input_dict[standard_component_specs.MODEL_BLESSING_KEY]
        )
        dataset = read_dataset(custom_config)
        found = facts.gather(
            model=artifact_utils.get_single_instance(
                input_dict[standard_component_specs.MODEL_KEY]
            ),
            model_dir=self.GetModelPath(input_dict),
            evaluation=evaluations[0],
            blessing=facts.evaluator_blessing(blessing, evaluations[0].uri, dataset),
            blessing_artifact=blessing,
            statistics=statistics[0],
            dataset=dataset,
            slice_rule=read_evaluator(custom_config),
            version=version,
            version_dir=version_dir,
            serving_check=self._serving_check.to_text() if self._serving_check else None,
        )
        return card.model_card(found)

    def _write_model_card(
        self,
        input_dict: dict[str, list[Any]],
        custom_config: dict[str, Any],
        version: str,
        version_dir: str,
    ) -> str | None:
        """Writes the version's model card unless it has one; returns its path, or None
        where the Pusher was not given the evaluation to make it from."""
        made = self._model_card(input_dict, custom_config, version, version_dir)
        if made is None:
            logging.warning("No model card for version %s: the Pusher has no evaluation", version)
            return None
        path = write_model_card(version_dir, made)
        logging.info("Model card: %s", path)
        return path

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
        self._mark_refused(pushed_model, refusal)
        return True

    def _mark_refused(self, pushed_model: Any, refusal: str) -> None:
        logging.warning("Blessed model not pushed: %s", refusal)
        self._MarkNotPushed(pushed_model)
        pushed_model.set_string_custom_property(PUSH_REFUSED_PROPERTY, refusal)

    def _push_refusal(
        self, model_dir: str, base_directory: str, custom_config: dict[str, Any]
    ) -> str | None:
        """Why not to push `model_dir` (the serving folder's pin or set-aside versions), or None.

        A Pusher that serves from elsewhere too (serving_ops/vertex/pusher.py) adds its own reasons.
        """
        del custom_config  # the serving folder says it all here
        return push_refusal(model_dir, base_directory)


class AtomicPusherSpec(standard_component_specs.PusherSpec):
    """TFX's Pusher inputs, what the model card is made from, and the span shift gate's verdict."""

    INPUTS = {
        **standard_component_specs.PusherSpec.INPUTS,
        EVALUATION_KEY: ChannelParameter(type=standard_artifacts.ModelEvaluation, optional=True),
        STATISTICS_KEY: ChannelParameter(type=standard_artifacts.ExampleStatistics, optional=True),
        SPAN_SHIFT_KEY: ChannelParameter(type=standard_artifacts.JsonValue, optional=True),
        EXAMPLES_KEY: ChannelParameter(type=standard_artifacts.Examples, optional=True),
    }


class AtomicPusher(Pusher):
    """TFX's Pusher with an executor that pushes atomically and never twice, writes a model
    card into each version it pushes, and holds back a span the SpanShiftGate stopped."""

    SPEC_CLASS = AtomicPusherSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(AtomicPusherExecutor)

    def __init__(
        self,
        *,
        model: Any,
        model_blessing: Any,
        push_destination: Any,
        custom_config: dict[str, Any],
        evaluation: Any | None = None,
        statistics: Any | None = None,
        span_shift: Any | None = None,
        examples: Any | None = None,
    ):
        """Like TFX's Pusher, plus the Evaluator's `evaluation` and StatisticsGen's
        `statistics` channels for the model card (without `evaluation`, no card), the
        SpanShiftGate's `span_shift` verdict (none: no gate, nothing held back), and
        ExampleGen's `examples` for a model that comes without warmup requests."""
        spec = AtomicPusherSpec(
            model=model,
            model_blessing=model_blessing,
            push_destination=push_destination,
            custom_config=json_utils.dumps(custom_config),
            evaluation=evaluation,
            statistics=statistics,
            span_shift=span_shift,
            examples=examples,
            pushed_model=Channel(type=standard_artifacts.PushedModel),
        )
        # TFX's Pusher.__init__ builds its own spec, which has no room for these inputs.
        BaseComponent.__init__(self, spec=spec)
