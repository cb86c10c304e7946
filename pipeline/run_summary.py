"""The summary of a run: components, metrics, the blessing decision and the push.

Built from ML Metadata and the Evaluator's TFMA output after the run, printed
for people and written as JSON (`--summary-json`) for scripts and CI.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
from collections.abc import Callable, Sequence
from typing import Any

from ml_metadata.proto import metadata_store_pb2
from tfx.utils.path_constants import SERVING_MODEL_DIR

from common.config import DriftConfig, EvaluatorConfig
from common.interrupts import received_signal
from common.memory_meter import SAMPLED, MemoryPeak
from components.data_checks.anomalies import DataRejectedError
from components.evaluation.baseline_test import BaselineComparison
from components.evaluation.results import (
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
from components.example_gen.errors import DataFormatError
from components.explain.store import METHOD_NAMES, read_index
from components.preflight.memory import describe as describe_bytes
from components.pusher import (
    ALREADY_PUSHED_PROPERTY,
    MODEL_CARD_ERROR_PROPERTY,
    MODEL_CARD_PROPERTY,
    PUSH_REFUSED_PROPERTY,
    SERVING_CHECK_PROPERTY,
    SERVING_CHECK_SERVER_PROPERTY,
)
from components.serving.measurements import read_measurements
from components.serving.server_check import ServingCheckError
from components.serving.temperature import TEMPERATURE_INFO_KEY, TemperatureFit
from components.span_shift_gate import VERDICT_KEY, read_gate_verdict
from pipeline.node_ids import SERVED_MODEL_OUTPUTS, NodeIds
from pipeline.run_record import SCHEMA_BOOTSTRAPPED_PROPERTY, RunRecord, custom_property
from pipeline.tuning_results import TuningResult, read_tuning
from serving_ops.local.blessing import manual_blessing_of, trainer_model_dir

TRAINING_INFO_FILE = pathlib.Path(SERVING_MODEL_DIR) / "assets.extra" / "training_info.json"
# Noted on the run (`RunRecord.note`): the `evaluator:` section the run flagged slices
# by, so a report rebuilt from the run folder flags them by the same margin.
EVALUATOR_RULES_PROPERTY = "evaluator_config"
# Noted on a run of spans: the `drift:` section its span shift was judged by.
DRIFT_RULES_PROPERTY = "drift_config"


@dataclasses.dataclass(kw_only=True)
class MeasuredMemory:
    """Peak memory (common.memory_meter) of a component, or of a whole run.

    Each figure is None where it was not measured (the component never ran, or a
    report was rebuilt from ML Metadata): the pipeline process's peak resident set
    size, how it was measured ("high_water_mark": exact; "sampled": a lower bound),
    the largest child process's own peak (None: none ran), and TensorFlow's
    allocator peak per device (None: its runtime was not running or keeps no statistics).
    """

    peak_rss_bytes: int | None = None
    peak_rss_measured: str | None = None
    child_peak_rss_bytes: int | None = None
    tensorflow_peak_bytes: dict[str, int] | None = None

    def add_memory(self, peak: MemoryPeak) -> None:
        """Takes the meter's figures."""
        self.peak_rss_bytes = peak.rss_bytes
        self.peak_rss_measured = peak.rss_measured
        self.child_peak_rss_bytes = peak.child_rss_bytes
        self.tensorflow_peak_bytes = peak.tensorflow_bytes

    def memory_peak(self) -> MemoryPeak | None:
        """The figures as the meter gave them, None if not measured."""
        if self.peak_rss_bytes is None or self.peak_rss_measured is None:
            return None
        return MemoryPeak(
            self.peak_rss_bytes,
            self.peak_rss_measured,
            self.child_peak_rss_bytes,
            self.tensorflow_peak_bytes,
        )

    def describe_memory(self, where: str = "") -> str:
        """`peak 1.9 GiB` (a sampled lower bound: `peak >=1.9 GiB`), `where` after it, then any
        child's and TensorFlow's largest device peak; empty when nothing was measured."""
        if self.peak_rss_bytes is None:
            return ""
        at_least = ">=" if self.peak_rss_measured == SAMPLED else ""
        parts = [f"peak {at_least}{describe_bytes(self.peak_rss_bytes)}{where}"]
        if self.child_peak_rss_bytes is not None:
            parts.append(f"child {describe_bytes(self.child_peak_rss_bytes)}")
        device, peak = max(
            (self.tensorflow_peak_bytes or {}).items(), key=lambda item: item[1], default=("", 0)
        )
        if peak:  # a device whose allocator held nothing says nothing here
            parts.append(f"TF {device} {describe_bytes(peak)}")
        return ", ".join(parts)


@dataclasses.dataclass
class ComponentResult(MeasuredMemory):
    id: str
    status: str  # executed | cached | failed | interrupted | skipped
    seconds: float


@dataclasses.dataclass
class RunSummary(MeasuredMemory):
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
    tuning: TuningResult | None
    log_file: str | None
    interrupted: str | None = None  # e.g. "SIGINT during Trainer"
    # The SavedModel, then each TFLite variant: name, path (where it is served, or
    # null), published, reason (why held back), accuracy, accuracy_drop, size_bytes, gzip_bytes,
    # latency_ms (median single-image, on the CPU that ran the ServingPackager).
    serving_variants: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # Every class's name in label order (dataset.source.label_names, else "0", "1", ...),
    # and each class's precision, recall and counts on the eval split, in that order.
    class_names: list[str] = dataclasses.field(default_factory=list)
    per_class_metrics: list[ClassMetrics] = dataclasses.field(default_factory=list)
    # How sure the candidate was against how often it was right (eval split), bucketed.
    calibration: Calibration | None = None
    # The candidate on each slice of the eval split (class; for photos, stored format and
    # size bucket; span and source folder where ExampleGen records them), each flagged when
    # its accuracy is below the overall one by more than slice_margin and it holds at least
    # slice_min_examples examples; and, where slice_accuracy_lower_bounds names its kind, the
    # bound and whether it was met, missed or not judged (fewer than slice_min_examples).
    slices: list[SliceMetrics] = dataclasses.field(default_factory=list)
    slice_margin: float | None = None
    slice_min_examples: int | None = None
    # The candidate against the last blessed model on the same eval examples: the examples
    # only one of the two got right, the test (evaluator.baseline_test), its confidence and
    # p-value, and whether it refused the candidate; None for a first model.
    baseline_comparison: BaselineComparison | None = None
    # The Explainer's attribution maps (components/explain/): method, settings, and each
    # explained eval answer (index, label, predicted, probability, mistake); None if none.
    attributions: dict[str, Any] | None = None
    # The schema this run bootstrapped for a new dataset (to review and commit), or None.
    schema_bootstrapped: str | None = None
    # Set when a person blessed the model the Evaluator refused: reason and blessed_by.
    manual_blessing: dict[str, str] | None = None
    # The Pusher's serving check: "passed (...)", "failed: why", "not run: ...", or None.
    serving_check: str | None = None
    # The server that ran it: "tensorflow_model_server", or "model_server.py" (the Python
    # server, where tensorflow_model_server is not on PATH); None when no server started.
    serving_check_server: str | None = None
    # The pushed version's model card (model_card.json; model_card.html beside it), or None.
    model_card: str | None = None
    # Why the pushed version has no card (the push stands without one), or None.
    model_card_error: str | None = None
    # A run of spans with a served model: the new span's images against the served model's
    # (components/drift/span_shift.py): DriftCheck.to_json() plus its `headline`; else None.
    # With drift.block_push, the SpanShiftGate's verdict, the one the Pusher obeyed.
    span_shift: dict[str, Any] | None = None
    # MeasuredMemory's figures are the run's: the largest of each over its components and
    # the moments between them; this names the component the process's peak was reached in
    # (None: between components, or not measured).
    peak_rss_component: str | None = None
    # The fields chosen from the data (pipeline/recipe.py): value and reason each, and the
    # one line saying what a pretrained backbone out of reach was replaced with.
    chosen_defaults: dict[str, Any] | None = None

    @classmethod
    def without_results(
        cls,
        pipeline: str,
        components: list[ComponentResult],
        error: BaseException | None,
        log_file: str | None,
    ) -> RunSummary:
        """A summary with the run's outcome but no metrics, blessing or push yet."""
        signum = received_signal()
        interrupted = None
        if signum is not None:  # whatever exception a library turned the interrupt into
            where = next((c.id for c in components if c.status == "interrupted"), None)
            interrupted = f"{signum.name} during {where}" if where else signum.name
        error_text = f"{type(error).__name__}: {error}" if error else None
        failed_check = isinstance(error, ServingCheckError)
        return cls(
            pipeline=pipeline,
            succeeded=error is None and interrupted is None,
            data_rejected=isinstance(error, (DataRejectedError, DataFormatError))
            and interrupted is None,
            error=f"interrupted by {interrupted}" if interrupted else error_text,
            components=components,
            metrics={},
            baseline_metrics=None,
            blessed=False,
            blessing_reason="",
            pushed_model=None,
            push_note="the candidate failed the serving check"
            if failed_check
            else "the run stopped before the Pusher",
            trainer=None,
            tuning=None,
            log_file=log_file,
            interrupted=interrupted,
            serving_check=f"failed: {error}" if failed_check else None,
            serving_check_server=error.server if failed_check else None,
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

    def add_span_shift(self, new_model_uri: str, served_model_uri: str, drift: DriftConfig) -> None:
        """Compares the new model's training images with the served model's (a run of spans).

        Both are Model artifacts' URIs: the run's model and the Evaluator's baseline. A
        comparison that fails is a note in the result, never an error: a summary must not
        fail the run.
        """
        # TensorFlow and TFDV, only for a run that compares spans.
        from components.drift.compare import DriftCheck
        from components.drift.span_shift import kept, model_span_shift

        try:
            self.span_shift = model_span_shift(new_model_uri, served_model_uri, drift)
        except Exception as error:  # noqa: BLE001 (a report of the run must not fail it)
            note = f"could not compare ({type(error).__name__}: {error})"
            self.span_shift = kept(DriftCheck(0, "", note=note))

    def add_push(self, pushed_property: Callable[[str], Any]) -> None:
        """Takes the push from the Pusher's PushedModel: `pushed_property(name)` reads one of
        its custom properties (None when unset), wherever the run recorded them."""
        if pushed_property("pushed"):
            self.pushed_model = pushed_property("pushed_destination")
            self.push_note = (
                "already served; not pushed again"
                if pushed_property(ALREADY_PUSHED_PROPERTY)
                else "new version"
            )
            self.serving_check = pushed_property(SERVING_CHECK_PROPERTY) or None
            self.serving_check_server = pushed_property(SERVING_CHECK_SERVER_PROPERTY) or None
            self.model_card = pushed_property(MODEL_CARD_PROPERTY) or None
            self.model_card_error = pushed_property(MODEL_CARD_ERROR_PROPERTY) or None
        else:
            self.push_note = pushed_property(PUSH_REFUSED_PROPERTY) or "not blessed"

    def add_run_memory(self, peak: MemoryPeak | None, component: str | None) -> None:
        """Takes the run's peaks (`common.memory_meter.highest` of every interval)."""
        if peak is not None:
            self.add_memory(peak)
            self.peak_rss_component = component

    def temperature_fit(self) -> TemperatureFit | None:
        """The ServingPackager's temperature fit (`serving.temperature_scaling`), recorded in
        the served model's training_info, if it made one."""
        recorded = (self.trainer or {}).get(TEMPERATURE_INFO_KEY)
        return TemperatureFit.from_json(recorded) if recorded else None

    def describe_attributions(self) -> str:
        """One line: how many mistakes and right answers the Explainer mapped, and how."""
        chosen = self.attributions["chosen"]
        mistakes = sum(answer["mistake"] for answer in chosen)
        method = METHOD_NAMES.get(self.attributions["method"], self.attributions["method"])
        settings = self.attributions["settings"]
        return (
            f"attributions: {mistakes} mistakes and {len(chosen) - mistakes} right answers "
            f"of {settings['examined_examples']:,} eval examples mapped with {method} "
            f"({settings['seconds']:.1f} s; the report's Why it decided)"
        )

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

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    def problems(self) -> str:
        """What went wrong, for stderr: empty when the run succeeded."""
        lines = []
        if self.data_rejected:
            lines.append("DATA REJECTED: nothing was trained or pushed")
        if self.interrupted:
            lines.append(
                f"INTERRUPTED by {self.interrupted}: the run stopped. The same command resumes "
                "it: finished components come from the cache, the Trainer restarts at its last "
                "finished epoch."
            )
        elif self.error:
            lines.append(f"FAILED: {self.error}")
        return "\n".join(lines)

    @property
    def span_shifted(self) -> bool:
        return bool(self.span_shift and self.span_shift["shifted"])

    def to_text(self) -> str:
        """The result lines printed on stdout after the progress lines."""
        lines = []
        if self.trainer:
            lines.append(
                "trainer: {strategy}, {num_replicas} replica(s), batch {global_batch_size}, "
                "jit_compile={jit_compile}, precision={precision}".format(**self.trainer)
            )
        if self.tuning:
            lines.append(self.tuning.to_text())
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
        fit = self.temperature_fit()
        if fit:
            lines.append(fit.describe())
        if self.attributions:
            lines.append(self.describe_attributions())
        if self.succeeded or self.blessing_reason:
            lines.append(f"blessed: {'yes' if self.blessed else 'no'} ({self.blessing_reason})")
        lines.append(f"pushed: {self.pushed_model or 'nothing'} ({self.push_note})")
        if self.serving_check:
            lines.append(f"serving check: {self.serving_check}")
        if self.model_card:
            lines.append(f"model card: {self.model_card} (and model_card.html beside it)")
        elif self.model_card_error:
            lines.append(f"model card: not written ({self.model_card_error})")
        if self.span_shift:
            lines.append(self.span_shift["headline"])
        lines.extend(describe_variants(self.serving_variants))
        if self.peak_rss_bytes is not None:
            where = f" in {self.peak_rss_component}" if self.peak_rss_component else ""
            lines.append(f"memory: {self.describe_memory(where)}")
        if self.log_file:
            lines.append(f"logs: {self.log_file}")
        return "\n".join(lines)


def _apply_manual_blessing(
    summary: RunSummary, record: RunRecord, pipeline_name: str, model_id: int
) -> None:
    """A blessing given by hand after the run overrides the Evaluator's refusal."""
    recorded = manual_blessing_of(record.store, pipeline_name, model_id)
    if recorded is None:
        return
    summary.manual_blessing = {"reason": recorded.reason, "blessed_by": recorded.blessed_by}
    refused = (
        f"; the Evaluator refused: {summary.blessing_reason}" if summary.blessing_reason else ""
    )
    summary.blessing_reason = (
        f"blessed by hand by {recorded.blessed_by}: {recorded.reason}{refused}"
    )
    summary.blessed = True
    if recorded.pushed_destination:
        summary.pushed_model = recorded.pushed_destination
        summary.push_note = "pushed by the manual blessing"


def describe_variants(variants: list[dict[str, Any]]) -> list[str]:
    """A line per served model: eval accuracy, size, single-image latency, where or why not."""
    if not variants:
        return []
    lines = ["served models (eval accuracy, size, gzipped size, single-image latency):"]
    for v in variants:
        where = v["path"] or (f"held back: {v['reason']}" if v["reason"] else "not pushed")
        lines.append(
            f"  {v['name']:<13} {v['accuracy']:.4f} {v['size_bytes'] / 1024:7.1f} KB "
            f"{v['gzip_bytes'] / 1024:7.1f} KB gz {v['latency_ms']:8.3f} ms  {where}"
        )
    return lines


def serving_variants(model_dir: str, pushed_dir: str | None) -> list[dict[str, Any]]:
    """The measurements the exported model carries, with the served path of each file."""
    measurements = read_measurements(model_dir)
    if measurements is None:
        return []
    variants = []
    for model in measurements["models"]:
        file = model.pop("file")
        served = pushed_dir and file is not None
        variants.append({**model, "path": str(pathlib.Path(pushed_dir, file)) if served else None})
    return variants


def summarize_run(
    record: RunRecord,
    components: list[ComponentResult],
    error: BaseException | None,
    log_file: str | None,
    pipeline_name: str,
    class_names: Sequence[str] = (),
    evaluator: EvaluatorConfig | None = None,
    drift: DriftConfig | None = None,
) -> RunSummary:
    """Collects statuses, metrics, the blessing and the push of the run just finished.

    `class_names` (every class, in label order) names the per-class metrics and the
    class slices; `evaluator` flags the slices, by default as the run noted it
    (EVALUATOR_RULES_PROPERTY), else by the defaults. `drift`, given for a run of
    spans (or noted as DRIFT_RULES_PROPERTY), judges the new span's images against the
    served model's; where the SpanShiftGate judged them before the Pusher, its verdict is
    the summary's.
    """
    summary = RunSummary.without_results(pipeline_name, components, error, log_file)
    summary.class_names = list(class_names)
    summary.schema_bootstrapped = record.noted(NodeIds.SCHEMA_GEN, SCHEMA_BOOTSTRAPPED_PROPERTY)
    tuner = record.node(NodeIds.TUNER).outputs
    if tuner.get("tuner_results") and tuner.get("best_hyperparameters"):
        summary.tuning = read_tuning(tuner["tuner_results"][0], tuner["best_hyperparameters"][0])
    trainer = record.node(NodeIds.TRAINER)
    model = served_model(record)  # the ServingPackager's, or the Trainer's
    if trainer.status != "skipped" and model is not None:
        # The Trainer's training_info.json, with the ServingPackager's temperature fit.
        info_path = pathlib.Path(model.uri) / TRAINING_INFO_FILE
        if info_path.exists():
            summary.trainer = json.loads(info_path.read_text())
    explanation = record.node(NodeIds.EXPLAINER).outputs.get("explanation")
    if trainer.status != "skipped" and explanation:
        summary.attributions = read_index(explanation[0].uri)

    gate = record.node(NodeIds.SPAN_SHIFT_GATE)
    judged = gate.status in ("executed", "cached") and gate.outputs.get(VERDICT_KEY)
    if judged:  # the check that decided the push (`drift.block_push`), not a second one
        summary.span_shift = read_gate_verdict(judged[0].uri)
    evaluator_node = record.node(NodeIds.EVALUATOR)
    if evaluator_node.outputs.get("evaluation") and evaluator_node.outputs.get("blessing"):
        evaluation_uri = evaluator_node.outputs["evaluation"][0].uri
        blessing = evaluator_node.outputs["blessing"][0]
        if evaluator is None:
            noted = record.noted(NodeIds.EVALUATOR, EVALUATOR_RULES_PROPERTY)
            evaluator = EvaluatorConfig.model_validate_json(noted) if noted else None
        blessed = bool(custom_property(blessing, "blessed"))
        summary.add_evaluation(evaluation_uri, blessed, evaluator)
        if drift is None:
            noted = record.noted(NodeIds.EVALUATOR, DRIFT_RULES_PROPERTY)
            drift = DriftConfig.model_validate_json(noted) if noted else None
        served = custom_property(blessing, "baseline_model")
        if drift is not None and served and model is not None and not judged:
            summary.add_span_shift(model.uri, served, drift)
        if class_names:
            summary.per_class_metrics = class_metrics(evaluation_uri, class_names)

    pusher = record.node(NodeIds.PUSHER)
    if pusher.outputs.get("pushed_model"):
        pushed = pusher.outputs["pushed_model"][0]
        summary.add_push(lambda name: custom_property(pushed, name))
    if model is not None:
        _apply_manual_blessing(summary, record, pipeline_name, model.id)
    if trainer.status != "skipped" and model is not None:
        summary.serving_variants = serving_variants(trainer_model_dir(model), summary.pushed_model)
    return summary


def served_model(record: RunRecord) -> metadata_store_pb2.Artifact | None:
    """The run's Model that the Evaluator judged and the Pusher published (or would have):
    the ServingPackager's, else the Trainer's; None before the Trainer made one."""
    for node, key in SERVED_MODEL_OUTPUTS:
        models = record.node(node).outputs.get(key)
        if models:
            return models[0]
    return None
