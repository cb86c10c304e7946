"""The Evaluator TFX runs: TFX's own, with an executor that judges what TFMA measured.

TFMA measures the candidate (and the last blessed model, on the same eval examples) with
no thresholds of its own (`evaluation/eval_config.py`), so TFX's executor writes no
blessing. This executor then reads the figures, applies the `evaluator:` rules once
(`evaluation/verdict.py`: the overall bound, the slice bounds on slices large enough to
judge, and the paired test against the baseline), writes the verdict beside TFMA's output
and the blessing from it: the one place a model is blessed or refused. TFMA keeps
aggregates; beside them the executor keeps the judged model's answer on each of the first
eval examples (`serving/eval_outcomes.py`), which `runs diff` compares between runs.
TFX names the executor by this module's path in compiled pipelines, so it stays here.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from typing import Any

from absl import logging

from tpu_pipeline.common import fileio
from tpu_pipeline.common.config import EvaluatorConfig
from tpu_pipeline.common.tfx_api import (
    BaseBeamComponent,
    Channel,
    ChannelParameter,
    Evaluator,
    ExecutionParameter,
    artifact_utils,
    evaluator_constants,
    executor_spec,
    json_utils,
    path_utils,
    standard_artifacts,
    standard_component_specs,
    tfx_evaluator_executor,
)
from tpu_pipeline.components.contract import OUTCOME_EXAMPLES_KEY, read_dataset, read_evaluator
from tpu_pipeline.components.evaluation.results import (
    overall_metrics,
    paired_counts,
    slice_metrics,
)
from tpu_pipeline.components.evaluation.verdict import VERDICT_FILE, Verdict, judge
from tpu_pipeline.components.packager import split_files
from tpu_pipeline.components.serving.answers import PixelClassifier
from tpu_pipeline.components.serving.eval_outcomes import record_eval_outcomes
from tpu_pipeline.components.span_shift_gate import SPAN_SHIFT_KEY, push_hold

CUSTOM_CONFIG_KEY = standard_component_specs.CUSTOM_CONFIG_KEY


def judge_evaluation(
    evaluation_uri: str,
    rules: EvaluatorConfig,
    class_names: Sequence[str],
    held_back: str | None = None,
) -> Verdict:
    """Judges TFMA's output in `evaluation_uri` by `rules` and writes the verdict beside it.

    Args:
      evaluation_uri: the Evaluator's output folder (local or gs://).
      rules: the `evaluator:` section.
      class_names: every class's name in label order, to name class slices.
      held_back: why the SpanShiftGate holds the model back (`span_shift_gate.push_hold`),
        a failure of its own: a held-back model is not blessed, so it never becomes the
        baseline the next run is compared with and started from (the served model stays).

    Raises:
      ValueError: TFMA measured a baseline but not the examples only one model got right.
    """
    candidate, baseline = overall_metrics(evaluation_uri)
    paired = paired_counts(evaluation_uri)
    if baseline is not None and paired is None:
        raise ValueError(
            f"{evaluation_uri}: TFMA measured the baseline but not the paired counts "
            "(components/evaluation/paired_metric.py); was the eval config built by "
            "build_eval_config?"
        )
    verdict = judge(
        candidate.get("accuracy"), slice_metrics(evaluation_uri, class_names, rules), paired, rules
    )
    if held_back is not None:
        verdict = dataclasses.replace(
            verdict, blessed=False, failures=[*verdict.failures, held_back]
        )
    with fileio.open(os.path.join(evaluation_uri, VERDICT_FILE), "w") as handle:
        handle.write(verdict.to_json())
    return verdict


class EvaluatorExecutor(tfx_evaluator_executor.Executor):
    """TFX's Evaluator executor, blessing by `judge_evaluation`'s verdict."""

    def Do(
        self,
        input_dict: dict[str, list[Any]],
        output_dict: dict[str, list[Any]],
        exec_properties: dict[str, Any],
    ) -> None:
        super().Do(input_dict, output_dict, exec_properties)  # TFMA measures, blesses nothing
        custom_config = json.loads(exec_properties[CUSTOM_CONFIG_KEY])
        evaluation_uri = artifact_utils.get_single_uri(
            output_dict[standard_component_specs.EVALUATION_KEY]
        )
        dataset = read_dataset(custom_config)
        gate_verdicts = input_dict.get(SPAN_SHIFT_KEY) or []
        verdict = judge_evaluation(
            evaluation_uri,
            read_evaluator(custom_config),
            dataset.class_names,
            held_back=push_hold(gate_verdicts[0].read()) if gate_verdicts else None,
        )
        # Each eval example's outcome, for `runs diff` (which examples flipped between runs).
        model = artifact_utils.get_single_instance(input_dict[standard_component_specs.MODEL_KEY])
        record_eval_outcomes(
            evaluation_uri,
            PixelClassifier(path_utils.serving_model_path(model.uri)),
            split_files(
                artifact_utils.get_single_instance(
                    input_dict[standard_component_specs.EXAMPLES_KEY]
                ),
                "eval",
            ),
            dataset,
            custom_config[OUTCOME_EXAMPLES_KEY],
        )
        _write_blessing(
            artifact_utils.get_single_instance(output_dict[standard_component_specs.BLESSING_KEY]),
            verdict,
            input_dict,
            exec_properties,
        )
        logging.info("Blessed: %s (%s)", verdict.blessed, verdict.reason())


def _write_blessing(
    blessing: Any,
    verdict: Verdict,
    input_dict: dict[str, list[Any]],
    exec_properties: dict[str, Any],
) -> None:
    """The ModelBlessing as TFX's executor writes it (the properties the baseline resolver and
    the Pusher read, and the BLESSED or NOT_BLESSED file), from the verdict."""
    model = input_dict[standard_component_specs.MODEL_KEY][0]
    blessing.set_string_custom_property(
        evaluator_constants.ARTIFACT_PROPERTY_CURRENT_MODEL_URI_KEY, model.uri
    )
    blessing.set_int_custom_property(
        evaluator_constants.ARTIFACT_PROPERTY_CURRENT_MODEL_ID_KEY, model.id
    )
    baselines = input_dict.get(standard_component_specs.BASELINE_MODEL_KEY)
    if baselines:
        blessing.set_string_custom_property(
            evaluator_constants.ARTIFACT_PROPERTY_BASELINE_MODEL_URI_KEY, baselines[0].uri
        )
        blessing.set_int_custom_property(
            evaluator_constants.ARTIFACT_PROPERTY_BASELINE_MODEL_ID_KEY, baselines[0].id
        )
    if "current_component_id" in exec_properties:
        blessing.set_string_custom_property("component_id", exec_properties["current_component_id"])
    marker = (
        evaluator_constants.BLESSED_FILE_NAME
        if verdict.blessed
        else evaluator_constants.NOT_BLESSED_FILE_NAME
    )
    with fileio.open(os.path.join(blessing.uri, marker), "w") as handle:
        handle.write("")
    blessing.set_int_custom_property(
        evaluator_constants.ARTIFACT_PROPERTY_BLESSED_KEY,
        evaluator_constants.BLESSED_VALUE
        if verdict.blessed
        else evaluator_constants.NOT_BLESSED_VALUE,
    )


class JudgingEvaluatorSpec(standard_component_specs.EvaluatorSpec):
    """TFX's Evaluator parameters, and the sections the verdict is judged by; its inputs,
    and the SpanShiftGate's verdict where `drift.block_push` places the gate."""

    PARAMETERS = {
        **standard_component_specs.EvaluatorSpec.PARAMETERS,
        CUSTOM_CONFIG_KEY: ExecutionParameter(type=str),
    }
    INPUTS = {
        **standard_component_specs.EvaluatorSpec.INPUTS,
        SPAN_SHIFT_KEY: ChannelParameter(type=standard_artifacts.JsonValue, optional=True),
    }


class JudgingEvaluator(Evaluator):
    """TFX's Evaluator with an executor that blesses by the `evaluator:` rules."""

    SPEC_CLASS = JudgingEvaluatorSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(EvaluatorExecutor)

    def __init__(
        self,
        *,
        examples: Any,
        model: Any,
        baseline_model: Any,
        eval_config: Any,
        custom_config: dict[str, Any],
        span_shift: Any | None = None,
    ):
        """Like TFX's Evaluator, plus `custom_config` (`contract.evaluator_sections`) and the
        SpanShiftGate's `span_shift` verdict (none: no gate, nothing held back)."""
        spec = JudgingEvaluatorSpec(
            examples=examples,
            model=model,
            baseline_model=baseline_model,
            span_shift=span_shift,
            eval_config=eval_config,
            example_splits=json_utils.dumps(None),
            fairness_indicator_thresholds=json_utils.dumps(None),
            custom_config=json_utils.dumps(custom_config),
            evaluation=Channel(type=standard_artifacts.ModelEvaluation),
            blessing=Channel(type=standard_artifacts.ModelBlessing),
        )
        # TFX's Evaluator.__init__ builds its own spec, which has no room for custom_config.
        BaseBeamComponent.__init__(self, spec=spec)
