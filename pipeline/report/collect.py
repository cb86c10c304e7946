"""Gathers everything the report shows about one run into a `RunReport`.

The run summary (`tpu_pipeline.pipeline.results.run_summary`) already answers what ran, the
metrics, the blessing and the push; this adds what only a report shows: data
statistics, training curves, per-class evaluation, the serving signature and
sample predictions. Each part is read from the run's own artifacts, found
through ML Metadata, and is None when the run never got that far.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import pathlib
import platform
from typing import Any

from ml_metadata.proto import metadata_store_pb2

from tpu_pipeline.common.config import DatasetConfig, PipelineConfig
from tpu_pipeline.common.memory_meter import highest
from tpu_pipeline.components.contract import read_dataset
from tpu_pipeline.components.data_checks.anomalies import DataRejectedError
from tpu_pipeline.components.evaluation import results as evaluation_results
from tpu_pipeline.components.example_gen.odd_images import read_odd_images
from tpu_pipeline.components.explain.store import Attributions, read_attributions
from tpu_pipeline.components.serving.export import SERVING_SIGNATURE
from tpu_pipeline.pipeline.local.run_memory import read_run_memory
from tpu_pipeline.pipeline.report import data_facts, history_facts, serving_facts, tensorboard_logs
from tpu_pipeline.pipeline.report.run_store import StoredRun, open_latest_run
from tpu_pipeline.pipeline.results import tuning_results
from tpu_pipeline.pipeline.results.run_record import custom_property
from tpu_pipeline.pipeline.results.run_summary import ComponentResult, RunSummary
from tpu_pipeline.pipeline.results.summary_reading import served_model, summarize_run
from tpu_pipeline.pipeline.runs.history import SERVING_DIR
from tpu_pipeline.pipeline.wiring.node_ids import NodeIds
from tpu_pipeline.serving_ops.local.blessing import trainer_model_dir
from tpu_pipeline.serving_ops.local.folder import list_versions

VERSIONED_PACKAGES = (
    "tfx",
    "tensorflow",
    "tf-keras",
    "tensorflow-transform",
    "tensorflow-data-validation",
    "tensorflow-model-analysis",
    "apache-beam",
    "ml-metadata",
)
SAMPLES_EXAMINED = 1000
SAMPLES_SHOWN = 24
_UNFINISHED = (metadata_store_pb2.Execution.NEW, metadata_store_pb2.Execution.RUNNING)
SCHEMA_FILE_PROPERTY = "schema_file"  # ImportSchemaGen's execution property: the file it read


@dataclasses.dataclass
class TrainingFacts:
    scalars: dict[str, dict[str, list[float]]]  # split -> metric -> per-epoch values
    log_dir: str
    tensorboard_command: str
    summary_kinds: dict[str, list[str]]


@dataclasses.dataclass
class DeploymentFacts:
    model_dir: str  # the pushed copy, else the served model (the ServingPackager's)
    signatures: dict[str, dict[str, dict[str, str]]]  # name -> inputs/outputs -> name -> type
    model_id: int  # the served Model in ML Metadata, as `serving bless` and `serving list` say
    model_uri: str  # the served model's folder, which `serving bless` takes too
    served: bool = False  # model_dir is the served copy (else the candidate nothing serves)


@dataclasses.dataclass
class RunReport:
    """One run, as the report page and its figures show it."""

    pipeline: str
    run_id: str | None
    run_dir: str
    summary: RunSummary
    outcome: str
    config: dict[str, Any] | None
    versions: dict[str, str]
    class_names: list[str] = dataclasses.field(default_factory=list)  # in label order
    data: data_facts.DataFacts | None = None
    training: TrainingFacts | None = None
    evaluation: evaluation_results.EvaluationFacts | None = None
    deployment: DeploymentFacts | None = None
    samples: serving_facts.Samples | None = None
    attributions: Attributions | None = None
    history: history_facts.HistoryFacts | None = None
    serving_now: str | None = None  # the version RUN/serving_model serves now, if any


def describe_outcome(summary: RunSummary) -> str:
    """The run's result in one sentence."""
    failed = next((c.id for c in summary.components if c.status == "failed"), None)
    where = f" in {failed}" if failed else ""
    pushed = f"{summary.pushed_model} was pushed" if summary.pushed_model else "nothing was pushed"
    if summary.interrupted:
        return (
            f"Interrupted by {summary.interrupted}: the run stopped and {pushed}; "
            "the same command resumes it."
        )
    if summary.data_rejected:  # bad files, a wrong data folder, or data breaking the schema
        return f"Data rejected{where}, so nothing was trained or pushed: {summary.error}"
    if summary.error:
        return f"The run failed{where} and {pushed}: {summary.error}"
    if not summary.blessed:
        return f"Trained but not blessed ({summary.blessing_reason}); {pushed}."
    if not summary.pushed_model:
        return f"Blessed ({summary.blessing_reason}) but not pushed: {summary.push_note}."
    return (
        f"Blessed ({summary.blessing_reason}) and served from {summary.pushed_model} "
        f"({summary.push_note})."
    )


def versions() -> dict[str, str]:
    """Python and the pipeline's main libraries, as installed where the report was built."""
    found = {"python": platform.python_version()}
    for package in VERSIONED_PACKAGES:
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = "not installed"
    return found


def _latest_log(run_dir: pathlib.Path) -> str | None:
    logs = sorted((run_dir / "logs").glob("run-*.log"))
    return str(logs[-1]) if logs else None


def summarize_stored_run(stored: StoredRun, class_names: list[str]) -> RunSummary:
    """Rebuilds the run summary from MLMD alone, for a report made after the run.

    MLMD records that a component failed but not why; anomalies explain a
    rejected run, and the run's log file has any other error. Peak memory comes
    from the run folder's memory file (`tpu_pipeline.pipeline.local.run_memory`).
    """
    components = [
        ComponentResult(node, _stored_status(stored, node), round(stored.seconds(node), 2))
        for node in stored.node_ids
    ]
    memory = read_run_memory(stored.run_dir, stored.run_id)
    for component in components:
        if component.id in memory:
            component.add_memory(memory[component.id])
    stopped = next((c.id for c in components if c.status == "interrupted"), None)
    failed = [c.id for c in components if c.status == "failed"]
    error: BaseException | None = None
    if failed:
        anomalies_artifact = stored.first_output(NodeIds.EXAMPLE_VALIDATOR, "anomalies")
        anomalies = data_facts.read_anomalies(anomalies_artifact) if anomalies_artifact else []
        if anomalies:
            error = DataRejectedError("data rejected: " + "; ".join(anomalies))
        else:
            error = RuntimeError(f"{failed[0]} failed; the run's log file has the full error")
    log_file = _latest_log(stored.run_dir)
    summary = summarize_run(
        stored.record, components, error, log_file, stored.pipeline_name, class_names
    )
    if stopped:  # which signal, MLMD does not say
        summary.interrupted = f"a signal or kill during {stopped}"
        summary.error = f"interrupted by {summary.interrupted}"
        summary.succeeded = summary.data_rejected = False
    summary.add_run_memory(*highest(memory.items()))  # the moments between them were not kept
    return summary


def _stored_status(stored: StoredRun, node: str) -> str:
    """The node's status in the stored run; `interrupted` when its execution never ended.

    TFX marks an execution failed when its component raises an exception; a stop
    (SIGINT, SIGTERM, a kill) leaves it running in ML Metadata after the run is over.
    """
    status = stored.record.node(node).status
    execution = stored.executions.get(node)
    if status == "failed" and execution is not None and execution.last_known_state in _UNFINISHED:
        return "interrupted"
    return status


def trainer_custom_config(stored: StoredRun) -> dict[str, Any] | None:
    """The custom_config the run's Trainer received (its dataset and trainer sections), with
    the sections of the steps after it that ran (`serving`, `explain`)."""
    execution = stored.executions.get(NodeIds.TRAINER)
    raw = custom_property(execution, "custom_config") if execution else None
    if not raw:
        return None
    sections = {}
    for node in (NodeIds.SERVING_PACKAGER, NodeIds.EXPLAINER):
        after = stored.executions.get(node)
        after_raw = custom_property(after, "custom_config") if after else None
        sections |= json.loads(after_raw) if after_raw else {}
    return sections | json.loads(raw)


def _collect_data(stored: StoredRun, label_feature: str | None) -> data_facts.DataFacts | None:
    statistics = stored.first_output(NodeIds.STATISTICS_GEN, "statistics")
    if statistics is None:
        return None
    anomalies = stored.first_output(NodeIds.EXAMPLE_VALIDATOR, "anomalies")
    examples = stored.first_output(NodeIds.EXAMPLE_GEN, "examples")
    odd = read_odd_images(examples.uri) if examples else None
    splits = data_facts.read_statistics(statistics)
    schema_gen = stored.executions.get(NodeIds.SCHEMA_GEN)
    return data_facts.DataFacts(
        splits=splits,
        anomalies=data_facts.read_anomalies(anomalies) if anomalies else None,
        class_imbalance=data_facts.class_imbalance(splits, label_feature)
        if label_feature
        else None,
        odd_images=odd.line() if odd and odd.odd else None,
        label_feature=label_feature,
        schema_file=custom_property(schema_gen, SCHEMA_FILE_PROPERTY) if schema_gen else None,
    )


def _collect_training(stored: StoredRun) -> TrainingFacts | None:
    model_run = stored.first_output(NodeIds.TRAINER, "model_run")
    if model_run is None:
        return None
    log_dir = pathlib.Path(model_run.uri)
    tuner_results = stored.first_output(NodeIds.TUNER, "tuner_results")
    command = tensorboard_logs.tensorboard_command(
        log_dir, trials_dir=tuning_results.trials_dir(tuner_results) if tuner_results else None
    )
    return TrainingFacts(
        scalars=tensorboard_logs.epoch_scalars(log_dir),
        log_dir=str(log_dir),
        tensorboard_command=tensorboard_logs.shell_line(command),
        summary_kinds=tensorboard_logs.summary_kinds(log_dir),
    )


def _collect_serving(
    stored: StoredRun, summary: RunSummary, dataset: DatasetConfig
) -> tuple[DeploymentFacts | None, serving_facts.Samples | None]:
    model = served_model(stored.record)  # the ServingPackager's, or the Trainer's
    if model is None:
        return None, None
    model_dir = summary.pushed_model or trainer_model_dir(model)
    signatures = serving_facts.load_signatures(model_dir)
    deployment = DeploymentFacts(
        model_dir,
        {name: serving_facts.describe_signature(serve) for name, serve in signatures.items()},
        model_id=model.id,
        model_uri=model.uri,
        served=summary.pushed_model is not None,
    )
    serve = signatures[SERVING_SIGNATURE]
    examples = stored.first_output(NodeIds.EXAMPLE_GEN, "examples")
    samples = None
    if examples is not None:
        records = serving_facts.eval_records(examples, SAMPLES_EXAMINED)
        samples = serving_facts.predict_samples(serve, records, dataset, SAMPLES_SHOWN)
    return deployment, samples


def serving_version(serving_dir: pathlib.Path) -> str | None:
    """The version a model server of `serving_dir` serves now (after any rollback or pin)."""
    if not serving_dir.is_dir():
        return None
    return next((v.version for v in list_versions(str(serving_dir)) if v.serving), None)


def collect_report(
    run_dir: pathlib.Path,
    summary: RunSummary | None = None,
    config: PipelineConfig | None = None,
    report_dir_name: str = "report",
) -> RunReport:
    """Reads the newest run of `run_dir` into a `RunReport`.

    Args:
      run_dir: a run folder (`<output_dir>/<pipeline>-<dataset>`).
      summary: the summary `run_local` returned, when reporting the run just
        finished: it carries the error text that MLMD does not keep. Without
        it the summary is rebuilt from MLMD.
      config: the run's configuration, shown in the report; without it the
        dataset and trainer sections the Trainer received are shown.
      report_dir_name: the run folder's report folder, which keeps a page per run.

    Raises:
      RunNotFoundError: no summary was given and the folder holds no run.
    """
    run_dir = pathlib.Path(run_dir).resolve()
    # A run that failed before any component started left nothing in MLMD;
    # the newest run there is an older one, which must not be reported as this.
    reached_mlmd = summary is None or bool(summary.components)
    stored = open_latest_run(run_dir) if reached_mlmd else None
    trainer_config = trainer_custom_config(stored) if stored else None
    # The dataset the Trainer received; before it ran, the configuration's.
    dataset = read_dataset(trainer_config) if trainer_config else None
    if dataset is None and config is not None:
        dataset = config.dataset
    class_names = list(dataset.class_names) if dataset else []
    if summary is None:
        summary = summarize_stored_run(stored, class_names)
    report = RunReport(
        pipeline=summary.pipeline,
        run_id=stored.run_id if stored else None,
        run_dir=str(run_dir),
        summary=summary,
        outcome=describe_outcome(summary),
        config=config.model_dump(mode="json") if config else trainer_config,
        versions=versions(),
        class_names=class_names,
        history=history_facts.collect_history(
            run_dir, stored.run_id if stored else None, report_dir_name
        ),
        serving_now=serving_version(run_dir / SERVING_DIR),
    )
    if stored is None:
        return report
    report.data = _collect_data(stored, dataset.label_feature if dataset else None)
    report.training = _collect_training(stored)
    explanation = stored.first_output(NodeIds.EXPLAINER, "explanation")
    if explanation is not None:
        report.attributions = read_attributions(explanation.uri)
    if trainer_config is None:
        return report
    evaluation = stored.first_output(NodeIds.EVALUATOR, "evaluation")
    if evaluation is not None:
        report.evaluation = evaluation_results.read_evaluation(evaluation.uri, class_names)
    report.deployment, report.samples = _collect_serving(stored, summary, dataset)
    return report
