r"""The Beam job behind `tpu-pipeline predict`: read and check records, batch, predict, write.

    files -> Reshuffle -> read each file with ExampleGen's checks, in chunks of records
          -> RunInference (BatchElements gathers small files; serving_default per batch)
          -> counters -> a block of CSV / JSON lines per batch (or PredictionLogs)
          -> one output file
                     \-> drift signals per record -> TFDV statistics
    the model's reference signals -> TFDV statistics  (compared after the job)

The model step is Beam's RunInference with a handler for the pipeline's
`serving_default` (`model_handler.py`): the SavedModel loads once per worker
process and is shared by its threads. Any runner works: locally the in-process
DirectRunner; Beam arguments (e.g. `--runner=DataflowRunner --project=...
--region=... --temp_location=gs://...`) go to `PipelineOptions` unchanged."""

from __future__ import annotations

import dataclasses
import os
import posixpath
import threading
from collections.abc import Sequence

import apache_beam as beam
import numpy as np
from apache_beam.metrics.metric import Metrics, MetricsFilter
from apache_beam.ml.inference.base import RunInference
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions

from tpu_pipeline.common import fileio
from tpu_pipeline.common.config import ConfigError, DatasetConfig, DriftConfig, ExplainConfig
from tpu_pipeline.common.owned_paths import check_replaceable, owned_file
from tpu_pipeline.components.drift.compare import DriftCheck
from tpu_pipeline.components.example_gen.errors import DataFormatError, data_format_error_in
from tpu_pipeline.components.example_gen.formats import list_inputs, source_format, split_inputs
from tpu_pipeline.components.explain.store import Attributions
from tpu_pipeline.pipeline.batch_predict.drift_check import DriftPlan, check_drift
from tpu_pipeline.pipeline.batch_predict.explain import (
    ExplainPlan,
    check_explain_dir,
    explain_least_confident,
)
from tpu_pipeline.pipeline.batch_predict.model_handler import ServingDefaultHandler
from tpu_pipeline.pipeline.batch_predict.model_path import resolve_model_version, served_class_count
from tpu_pipeline.pipeline.batch_predict.outputs import output_extension, write_predictions
from tpu_pipeline.pipeline.batch_predict.predictions import Predictions, RowFormat
from tpu_pipeline.pipeline.batch_predict.records import READ_CHUNK, ReadRecords
from tpu_pipeline.pipeline.local.progress import LiveStatus

_COUNTER_NAMESPACE = "tpu-pipeline-predict"


class _InProcessCount:
    """Records predicted in this process: the live progress of an in-process runner."""

    def __init__(self):
        self._lock = threading.Lock()
        self.value = 0

    def add(self, count: int) -> None:
        with self._lock:
            self.value += count


PREDICTED = _InProcessCount()


@dataclasses.dataclass(frozen=True)
class BatchResult:
    """What a finished job wrote."""

    model_dir: str
    output: str
    predictions: int
    labelled: int
    correct: int
    drift: DriftCheck
    explained: Attributions | None = None  # `predict --explain N`: the least confident N
    explain_dir: str | None = None


def input_files(dataset: DatasetConfig, data_dir: str, pattern: str | None = None) -> list[str]:
    """The files to predict on under `data_dir`, sorted.

    `pattern` (relative to data_dir) wins; else the dataset's `file_pattern`, else both
    of its `split_patterns`, else the format's default; `{SPAN}` matches every span.

    Raises:
      DataFormatError: the folder is missing or no input file matches (naming both).
    """
    source = source_format(dataset)
    if not fileio.isdir(data_dir):
        raise DataFormatError(f"--data-dir {data_dir}: no such folder")
    if pattern is None and dataset.file_pattern is None and dataset.split_patterns:
        patterns = dataset.split_patterns.model_dump()
        return sorted(
            {f for files in split_inputs(data_dir, patterns, source).values() for f in files}
        )
    pattern = pattern or dataset.file_pattern or source.default_pattern
    return list_inputs(posixpath.join(data_dir, pattern.replace("{SPAN}", "*")), source)


class _CountPredictions(beam.DoFn):
    """Counts the records predicted, labelled and predicted right, passing the batches on."""

    def __init__(self):
        self._predicted = Metrics.counter(_COUNTER_NAMESPACE, "predictions")
        self._labelled = Metrics.counter(_COUNTER_NAMESPACE, "labelled")
        self._correct = Metrics.counter(_COUNTER_NAMESPACE, "correct")

    def process(self, predictions: Predictions):
        labels = np.array([-1 if label is None else label for label in predictions.labels])
        known = labels >= 0
        classes = predictions.probabilities.argmax(axis=-1)
        self._predicted.inc(len(predictions))
        self._labelled.inc(int(known.sum()))
        self._correct.inc(int((classes[known] == labels[known]).sum()))
        PREDICTED.add(len(predictions))
        yield predictions


def build_pipeline(
    pipeline: beam.Pipeline,
    files: list[str],
    dataset: DatasetConfig,
    model_dir: str,
    rows: RowFormat,
    output: str,
    batch_size: int,
    drift: DriftPlan | None = None,
    explain: ExplainPlan | None = None,
    read_as: DatasetConfig | None = None,
) -> None:
    """Adds the job's steps to `pipeline`: every record of `files` (read as `read_as` if
    given, else as `dataset`) predicted into `output`, by the SavedModel in `model_dir`,
    `batch_size` records a call, the statistics `drift` compares and the records `explain`
    keeps, if given."""
    reader = ReadRecords(dataset, max(batch_size, READ_CHUNK), read_as)
    predictions = (
        pipeline
        | "ListFiles" >> beam.Create(files)
        | "SpreadFiles" >> beam.Reshuffle()  # a distributed runner reads files in parallel
        | "ReadRecords" >> beam.ParDo(reader)
        | "Predict" >> RunInference(ServingDefaultHandler(model_dir, batch_size))
        | "Count" >> beam.ParDo(_CountPredictions())
    )
    _ = predictions | "WritePredictions" >> write_predictions(output, rows)
    if drift is not None:
        drift.add_statistics(pipeline, predictions)
    if explain is not None:
        explain.add_to(predictions)


def _counter(result, name: str) -> int:
    query = MetricsFilter().with_namespace(_COUNTER_NAMESPACE).with_name(name)
    counters = result.metrics().query(query)["counters"]
    return sum(counter.committed or 0 for counter in counters)


def _runs_in_this_process(options: PipelineOptions) -> bool:
    runner = options.view_as(StandardOptions).runner
    mode = options.view_as(DirectOptions).direct_running_mode
    return runner in (None, "DirectRunner", "direct") and mode == "in_memory"


def _run_with_progress(pipeline: beam.Pipeline, options: PipelineOptions, status: LiveStatus):
    """Runs `pipeline` to its end, updating `status` with the records predicted so far."""
    finished: dict[str, object] = {}

    def run():
        try:
            result = pipeline.run()
            result.wait_until_finish()
            finished["result"] = result
        except BaseException as error:  # re-raised in the calling thread
            finished["error"] = error

    before = PREDICTED.value
    worker = threading.Thread(target=run, name="batch-predict", daemon=True)
    worker.start()
    in_process = _runs_in_this_process(options)
    runner = options.view_as(StandardOptions).runner
    while worker.is_alive():
        if in_process:
            status.update(f"predicting: {PREDICTED.value - before:,} records done")
        else:
            status.update(f"predicting on {runner}: its job page shows the records done")
        worker.join(0.25)
    if "error" in finished:
        raise finished["error"]
    return finished["result"]


def run_batch_predictions(
    model: str,
    dataset: DatasetConfig,
    data_dir: str,
    output: str,
    *,
    pattern: str | None = None,
    top_k: int = 3,
    batch_size: int = 64,
    beam_args: Sequence[str] = (),
    status: LiveStatus | None = None,
    drift: DriftConfig | None = None,
    explain: int = 0,
    explain_dir: str | None = None,
    explain_settings: ExplainConfig | None = None,
    read_as: DatasetConfig | None = None,
) -> BatchResult:
    """Predicts every record under `data_dir` with the pushed model `model` into `output`.

    Args:
      model: a version folder, or a serving_model or run folder (its newest version).
      dataset: how to read the files (format, features, shape) and the class names.
      data_dir: the folder (local or gs://) of files to predict on.
      output: the file to write; `.csv`, `.jsonl` or `.tfrecord` (PredictionLog).
      pattern: the files under data_dir (default: the dataset's, see `input_files`).
      top_k: classes listed per record.
      batch_size: records per call of the model.
      beam_args: Beam pipeline options (`--runner=...` and the runner's own).
      status: shows the records predicted so far while the job runs, if given.
      drift: the thresholds of the shift check against the model's reference
        (default: the `drift:` section's defaults).
      explain: attribution maps of this many of the least confident answers
        (`explain.py`), written to `explain_dir` (default: beside `output`, named
        after it) with the method and steps of `explain_settings`.
      read_as: how to read the files when not as `dataset` (`folder_dataset.FolderPlan`):
        photos decoded into the pixels of a model trained on pixel data.

    Raises:
      ConfigError: a bad model path, output extension, or a model whose class count
        is not the dataset's; `UserPathError` (one) for an `output` or `explain_dir` that
        holds a file of the user's (`common/owned_paths.py`).
      DataFormatError: the data folder is missing or empty, or a record is bad (named
        in one line); `output` is left as it was.
    """
    output_extension(output)
    check_replaceable(output, "--output")  # a user's file there: refused before the job
    if explain:
        explain_dir = explain_dir or default_explain_dir(output)
        check_explain_dir(explain_dir)
    model_dir = resolve_model_version(model)
    classes = served_class_count(model_dir)
    if classes != dataset.num_classes:
        raise ConfigError(
            f"--model {model_dir}: scores {classes} classes but dataset {dataset.name!r} has "
            f"{dataset.num_classes} (dataset.num_classes); give the dataset it was trained on"
        )
    files = input_files(read_as or dataset, data_dir, pattern)
    version = os.path.basename(model_dir)
    rows = RowFormat(dataset.class_names, top_k, int(version) if version.isdigit() else 0)
    options = PipelineOptions(list(beam_args))
    with owned_file(output, "--output") as partial:
        # Beside the new output, in its scratch folder: every runner's workers reach it.
        plan = DriftPlan.for_model(model_dir, dataset, drift or DriftConfig(), partial)
        pipeline = beam.Pipeline(options=options)
        compared = plan if isinstance(plan, DriftPlan) else None
        explained = (
            ExplainPlan(explain, explain_settings or ExplainConfig(), posixpath.dirname(partial))
            if explain
            else None
        )
        build_pipeline(
            pipeline,
            files,
            dataset,
            model_dir,
            rows,
            partial,
            batch_size,
            compared,
            explained,
            read_as,
        )
        try:
            if status is None:
                result = pipeline.run()
                result.wait_until_finish()
            else:
                result = _run_with_progress(pipeline, options, status)
        except Exception as error:
            cause = data_format_error_in(error)
            if cause is None:
                raise
            raise DataFormatError(cause) from None
        drift_check = check_drift(plan)
        if explained is not None:
            attributions = explain_least_confident(explained, model_dir, dataset, explain_dir)
    return BatchResult(
        model_dir,
        output,
        _counter(result, "predictions"),
        _counter(result, "labelled"),
        _counter(result, "correct"),
        drift_check,
        attributions if explained is not None else None,
        explain_dir if explained is not None else None,
    )


def default_explain_dir(output: str) -> str:
    """`predict --explain`'s folder when none is named: beside the output, named after it."""
    stem, _ = posixpath.splitext(output)
    return f"{stem}-explained"
