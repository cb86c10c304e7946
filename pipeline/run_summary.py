"""The summary of a run: components, metrics, the blessing decision and the push.

Built from ML Metadata and the Evaluator's TFMA output after the run, printed
for people and written as JSON (`--summary-json`) for scripts and CI.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Any

import tensorflow_model_analysis as tfma

from components.data_gate import DataRejectedError
from pipeline.eval_config import ACCURACY_METRIC
from pipeline.run_record import RunRecord, custom_property

TRAINING_INFO_FILE = pathlib.Path("Format-Serving") / "assets.extra" / "training_info.json"


@dataclasses.dataclass
class ComponentResult:
    id: str
    status: str  # executed | cached | failed | skipped
    seconds: float


@dataclasses.dataclass
class RunSummary:
    """Everything a person or a script needs to know about one run."""

    pipeline: str
    succeeded: bool
    data_rejected: bool
    error: str | None
    components: list[ComponentResult]
    metrics: dict[str, float]
    baseline_metrics: dict[str, float] | None
    blessed: bool
    blessing_reason: str
    pushed_model: str | None
    push_note: str
    trainer: dict[str, Any] | None
    log_file: str | None

    @classmethod
    def without_results(
        cls,
        pipeline: str,
        components: list[ComponentResult],
        error: BaseException | None,
        log_file: str | None,
    ) -> RunSummary:
        """A summary with the run's outcome but no metrics, blessing or push yet."""
        return cls(
            pipeline=pipeline,
            succeeded=error is None,
            data_rejected=isinstance(error, DataRejectedError),
            error=f"{type(error).__name__}: {error}" if error else None,
            components=components,
            metrics={},
            baseline_metrics=None,
            blessed=False,
            blessing_reason="",
            pushed_model=None,
            push_note="the run stopped before the Pusher",
            trainer=None,
            log_file=log_file,
        )

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    def to_text(self) -> str:
        """The few lines printed after the progress lines."""
        lines = []
        if self.data_rejected:
            lines.append("DATA REJECTED: nothing was trained or pushed")
        if self.error:
            lines.append(f"FAILED: {self.error}")
        if self.trainer:
            lines.append(
                "trainer: {strategy}, {num_replicas} replica(s), batch {global_batch_size}, "
                "jit_compile={jit_compile}, precision={precision}".format(**self.trainer)
            )
        if self.metrics:
            shown = ", ".join(f"{name}={value:.4f}" for name, value in sorted(self.metrics.items()))
            lines.append(f"metrics: {shown}")
        if self.succeeded or self.blessing_reason:
            lines.append(f"blessed: {'yes' if self.blessed else 'no'} ({self.blessing_reason})")
        lines.append(f"pushed: {self.pushed_model or 'nothing'} ({self.push_note})")
        if self.log_file:
            lines.append(f"logs: {self.log_file}")
        return "\n".join(lines)


def _overall_metrics(evaluation_uri: str) -> tuple[dict[str, float], dict[str, float] | None]:
    """Candidate and baseline metrics of the overall slice, by metric name."""
    candidate: dict[str, float] = {}
    baseline: dict[str, float] = {}
    for metrics_for_slice in tfma.load_metrics(evaluation_uri):
        if metrics_for_slice.slice_key.single_slice_keys:
            continue
        for entry in metrics_for_slice.metric_keys_and_values:
            key, value = entry.key, entry.value
            # Per-class metrics (a sub key) are the report's; the summary keeps overall ones.
            if key.is_diff or key.HasField("sub_key") or not value.HasField("double_value"):
                continue
            target = baseline if key.model_name == "baseline" else candidate
            target[key.name] = value.double_value.value
    if ACCURACY_METRIC in candidate:
        candidate["accuracy"] = candidate[ACCURACY_METRIC]
    if ACCURACY_METRIC in baseline:
        baseline["accuracy"] = baseline[ACCURACY_METRIC]
    return candidate, baseline or None


def _describe_failure(failure: Any) -> str:
    """Says in words which threshold a metric missed, and by how much."""
    name = "accuracy" if failure.metric_key.name == ACCURACY_METRIC else failure.metric_key.name
    value = failure.metric_value.double_value.value
    threshold = failure.metric_threshold
    if failure.metric_key.is_diff:
        allowed = threshold.change_threshold.absolute.value
        return (
            f"{name} changed by {value:+.4f} against the last blessed model "
            f"(allowed: {allowed:+.4f} or better)"
        )
    bound = threshold.value_threshold.lower_bound.value
    return f"{name} {value:.4f} is below the lower bound {bound:.4f}"


def _blessing_reason(evaluation_uri: str, blessed: bool, has_baseline: bool) -> str:
    result = tfma.load_validation_result(evaluation_uri)
    failures = [
        _describe_failure(failure)
        for per_slice in result.metric_validations_per_slice
        for failure in per_slice.failures
    ]
    if failures:
        return "; ".join(failures)
    if blessed:
        return "passed every threshold" + (
            " against the last blessed model" if has_baseline else " (first model: no baseline yet)"
        )
    return "validation failed"


def summarize_run(
    record: RunRecord,
    components: list[ComponentResult],
    error: BaseException | None,
    log_file: str | None,
    pipeline_name: str,
) -> RunSummary:
    """Collects statuses, metrics, the blessing and the push of the run just finished."""
    summary = RunSummary.without_results(pipeline_name, components, error, log_file)
    trainer = record.node("Trainer")
    if trainer.status != "skipped" and trainer.outputs.get("model"):
        info_path = pathlib.Path(trainer.outputs["model"][0].uri) / TRAINING_INFO_FILE
        if info_path.exists():
            summary.trainer = json.loads(info_path.read_text())

    evaluator = record.node("Evaluator")
    if evaluator.outputs.get("evaluation") and evaluator.outputs.get("blessing"):
        evaluation_uri = evaluator.outputs["evaluation"][0].uri
        summary.metrics, summary.baseline_metrics = _overall_metrics(evaluation_uri)
        summary.blessed = bool(custom_property(evaluator.outputs["blessing"][0], "blessed"))
        summary.blessing_reason = _blessing_reason(
            evaluation_uri, summary.blessed, summary.baseline_metrics is not None
        )

    pusher = record.node("Pusher")
    if pusher.outputs.get("pushed_model"):
        pushed = pusher.outputs["pushed_model"][0]
        if custom_property(pushed, "pushed"):
            summary.pushed_model = custom_property(pushed, "pushed_destination")
            summary.push_note = (
                "already served; not pushed again"
                if custom_property(pushed, "already_pushed")
                else "new version"
            )
        else:
            summary.push_note = "not blessed"
    return summary
