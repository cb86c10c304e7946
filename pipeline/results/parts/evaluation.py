"""The Evaluator's part: the candidate's metrics against the baseline's, on the whole eval
split, per class and per slice, and the blessing decision it took."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tpu_pipeline.common.config import EvaluatorConfig
from tpu_pipeline.components.evaluation.baseline_test import BaselineComparison
from tpu_pipeline.components.evaluation.results import (
    Calibration,
    ClassMetrics,
    SliceMetrics,
    blessing_reason,
    calibration,
    class_metrics,
    overall_metrics,
    read_verdict,
    slice_metrics,
)
from tpu_pipeline.pipeline.results.run_record import custom_property
from tpu_pipeline.pipeline.results.summary_part import (
    read_step,
    summary_key,
    summary_part,
    text_lines,
)
from tpu_pipeline.pipeline.wiring.node_ids import NodeIds

if TYPE_CHECKING:
    from tpu_pipeline.pipeline.results.summary_reading import FinishedRun

# Noted on the run (`RunRecord.note`): the `evaluator:` section the run flagged slices
# by, so a report rebuilt from the run folder flags them by the same margin.
EVALUATOR_RULES_PROPERTY = "evaluator_config"


@summary_part
class Evaluation:
    """What the Evaluator measured (TFMA, on the eval split) and decided."""

    metrics: dict[str, float] = summary_key(
        "the candidate's overall metrics on the eval split (TFMA), by name (`accuracy`, "
        "`example_count`, ...); empty without an evaluation",
        example={"accuracy": 0.9633, "example_count": 360.0},
        default_factory=dict,
    )
    baseline_metrics: dict[str, float] | None = summary_key(
        "the same metrics of the baseline (the last blessed model)",
        null="the first model, or no evaluation",
        example={"accuracy": 0.9578, "example_count": 360.0},
        default=None,
    )
    blessed: bool = summary_key(
        "whether the model is blessed: by the Evaluator, or by hand (`manual_blessing`)",
        example=True,
        default=False,
    )
    blessing_reason: str = summary_key(
        "the blessing decision in words; empty without an evaluation",
        example="accuracy 0.9633 meets the lower bound 0.9000 and is not worse than the "
        "baseline's 0.9578",
        default="",
    )
    class_names: list[str] = summary_key(
        'every class\'s name in label order (`dataset.source.label_names`, else "0", "1", '
        "...); empty for a run stopped before the pipeline started",
        example=["0", "1", "2"],
        default_factory=list,
    )
    per_class_metrics: list[ClassMetrics] = summary_key(
        "each class's precision, recall and counts on the eval split, in label order; "
        "empty without an evaluation",
        example=[
            {
                "class_id": 0,
                "class_name": "0",
                "examples": 36,
                "predicted": 35,
                "precision": 1.0,
                "recall": 0.9722,
            }
        ],
        default_factory=list,
    )
    calibration: Calibration | None = summary_key(
        "how sure the candidate was against how often it was right (eval split), bucketed",
        null="no evaluation",
        example={
            "expected_calibration_error": 0.0312,
            "examples": 360,
            "buckets": [
                {"low": 0.9, "high": 1.0, "examples": 331, "confidence": 0.981, "accuracy": 0.988}
            ],
        },
        default=None,
    )
    slices: list[SliceMetrics] = summary_key(
        "the candidate on each slice of the eval split (class; for photos, stored format and "
        "size bucket; span and source folder where ExampleGen records them), each flagged "
        "when its accuracy is below the overall one by more than `slice_margin` and it "
        "holds at least `slice_min_examples` examples; and, where "
        "`evaluator.slice_accuracy_lower_bounds` names its kind, the bound and whether it "
        "was met, missed or not judged (fewer than `slice_min_examples`); empty without an "
        "evaluation",
        example=[
            {
                "kind": "class",
                "value": "8",
                "examples": 35,
                "accuracy": 0.8571,
                "flagged": True,
                "bound": None,
                "bound_outcome": None,
            }
        ],
        default_factory=list,
    )
    slice_margin: float | None = summary_key(
        "the `evaluator.slice_margin` the slices were flagged by",
        null="no evaluation",
        example=0.1,
        default=None,
    )
    slice_min_examples: int | None = summary_key(
        "the `evaluator.slice_min_examples` the slices were flagged by",
        null="no evaluation",
        example=20,
        default=None,
    )
    baseline_comparison: BaselineComparison | None = summary_key(
        "the candidate against the last blessed model on the same eval examples: the "
        "examples only one of the two got right, the test (`evaluator.baseline_test`), its "
        "confidence and p-value, and whether it refused the candidate",
        null="the first model (no baseline), or no evaluation",
        example={
            "test": "mcnemar",
            "examples": 360,
            "candidate_right_only": 6,
            "baseline_right_only": 4,
            "allowed_drop": 0.01,
            "confidence": 0.95,
            "p_value": 0.38,
            "p_value_better": 0.38,
            "worse": False,
        },
        default=None,
    )

    def add_evaluation(
        self, evaluation_uri: str, blessed: bool, rules: EvaluatorConfig | None = None
    ) -> None:
        """Takes the metrics (candidate and baseline), the blessing and the slices from the
        Evaluator; `class_names` must be set first, to name the classes.

        Args:
          evaluation_uri: the Evaluator's TFMA output (a local path or a gs:// URI).
          blessed: its ModelBlessing's `blessed` property.
          rules: the `evaluator:` section whose margin flags slices (default: the defaults).
        """
        rules = rules or EvaluatorConfig()
        self.metrics, self.baseline_metrics = overall_metrics(evaluation_uri)
        self.blessed = blessed
        self.blessing_reason = blessing_reason(
            evaluation_uri, blessed, self.baseline_metrics is not None, self.class_names
        )
        verdict = read_verdict(evaluation_uri)
        self.baseline_comparison = verdict.baseline_comparison if verdict else None
        self.calibration = calibration(evaluation_uri)
        self.slices = slice_metrics(evaluation_uri, self.class_names, rules)
        self.slice_margin, self.slice_min_examples = rules.slice_margin, rules.slice_min_examples

    @read_step(40)
    def read_evaluation(self, run: FinishedRun) -> None:
        """The Evaluator's outputs, flagging slices by `run.evaluator`, else by the rules the
        run noted (EVALUATOR_RULES_PROPERTY), else by the defaults."""
        self.class_names = list(run.class_names)
        outputs = run.record.node(NodeIds.EVALUATOR).outputs
        if not (outputs.get("evaluation") and outputs.get("blessing")):
            return
        evaluation_uri = outputs["evaluation"][0].uri
        rules = run.evaluator
        if rules is None:
            noted = run.record.noted(NodeIds.EVALUATOR, EVALUATOR_RULES_PROPERTY)
            rules = EvaluatorConfig.model_validate_json(noted) if noted else None
        blessed = bool(custom_property(outputs["blessing"][0], "blessed"))
        self.add_evaluation(evaluation_uri, blessed, rules)
        if self.class_names:
            self.per_class_metrics = class_metrics(evaluation_uri, self.class_names)

    def describe_slices(self) -> str:
        """One line: the flagged slices with accuracy and size, or that none is flagged."""
        flagged = [s for s in self.slices if s.flagged]
        rule = (
            f"more than {self.slice_margin:.2f} below the overall accuracy "
            f"with at least {self.slice_min_examples} examples"
        )
        if not flagged:
            kinds = ", ".join(dict.fromkeys(s.kind for s in self.slices))
            return f"slices: none {rule} ({len(self.slices)} slices of {kinds})"
        shown = "; ".join(
            f"{s.kind}={s.value} {s.accuracy:.4f} ({s.examples:,} examples)" for s in flagged
        )
        return f"weak slices ({rule}): {shown}"

    @text_lines(20)
    def evaluation_lines(self) -> list[str]:
        lines = []
        if self.metrics:
            shown = ", ".join(f"{name}={value:.4f}" for name, value in sorted(self.metrics.items()))
            lines.append(f"metrics: {shown}")
        never_predicted = [
            c.class_name for c in self.per_class_metrics if c.examples and not c.predicted
        ]
        if never_predicted:
            lines.append(
                f"never predicted: {', '.join(never_predicted)} (recall 0 on the eval split)"
            )
        if self.slices:
            lines.append(self.describe_slices())
        if self.calibration:
            lines.append(
                f"calibration: expected calibration error "
                f"{self.calibration.expected_calibration_error:.4f} on "
                f"{self.calibration.examples:,} eval examples (top probability against "
                "how often it is right)"
            )
        return lines

    @text_lines(40)
    def blessing_lines(self) -> list[str]:
        if self.succeeded or self.blessing_reason:
            return [f"blessed: {'yes' if self.blessed else 'no'} ({self.blessing_reason})"]
        return []
