"""The Beam job behind `tpu-pipeline predict`: read and check records, batch, predict, write.

    files -> Reshuffle -> read each file with ExampleGen's checks, in chunks of records
          -> BatchElements (gathers small files) -> serving_default, two batches in flight
          -> a block of CSV / JSON lines per batch (or PredictionLogs) -> one output file

Records reach the model as ExampleGen writes them (`ExampleBuilder`), serialized,
through `serving_default`, so the predictions are what a model server answers
for the same records. TFRecords already in the pipeline's layout are checked a
batch at a time and go on as they are (`read_tfrecord_batches`). Beam moves
batches, never single records: per record, a Beam step costs more than a small
model's prediction. The SavedModel loads once per worker (`DoFn.setup`) and
predicts in threads of its own while the next records are read. Any runner
works: locally the in-process DirectRunner; Beam arguments (e.g.
`--runner=DataflowRunner --project=... --region=... --temp_location=gs://...`)
go to `PipelineOptions` unchanged."""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import functools
import os
import posixpath
import threading
from collections.abc import Iterator, Sequence

import apache_beam as beam
import numpy as np
import tensorflow as tf
from apache_beam.metrics.metric import Metrics, MetricsFilter
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions
from apache_beam.transforms.window import GlobalWindows
from apache_beam.utils import shared

from common.atomic_file import replaced_when_done
from common.config import ConfigError, DatasetConfig
from common.tfx_api import fileio
from components.example_gen.errors import DataFormatError, data_format_error_in
from components.example_gen.examples import ExampleBuilder
from components.example_gen.formats import (
    imports_unchanged,
    list_inputs,
    read_tfrecord_batches,
    source_format,
    split_inputs,
)
from components.serving.export import SERVING_INPUT_KEY, SERVING_OUTPUT_KEY, SERVING_SIGNATURE
from pipeline.batch_predict.model_path import resolve_model_version, served_class_count
from pipeline.batch_predict.outputs import output_extension, write_predictions
from pipeline.batch_predict.predictions import Predictions, RowFormat
from pipeline.progress import LiveStatus

_COUNTER_NAMESPACE = "tpu-pipeline-predict"
# Records read and checked at once, at least: a batch check of layout-ready TFRecords
# costs 1.9 µs a record in 1,024s against 3.4 µs in 256s (digits); the model still
# gets batches of `batch_size`.
READ_CHUNK = 1024
# Calls of the model at once: one call alone leaves part of the machine idle while
# Python hands it its inputs and takes its outputs (the digits SavedModel alone keeps
# 1.65 of 2 cores busy); a second call computes meanwhile (2 cores: 115,000-123,000
# against 100,000 predictions/s one call at a time). Records stay in order.
MODEL_CALLS_IN_FLIGHT = 2


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


@dataclasses.dataclass(frozen=True)
class _Records:
    """Consecutive records of one file, checked: `path:index`, serialized example, label."""

    sources: list[str]
    examples: list[bytes]
    labels: list[int | None]

    def __len__(self) -> int:
        return len(self.sources)


class _ReadRecords(beam.DoFn):
    """Yields every record of one file, checked as ExampleGen checks it, in `_Records` of
    at most `chunk_size`: Beam then moves batches, not single records."""

    def __init__(self, dataset: DatasetConfig, chunk_size: int):
        self._dataset_json = dataset.model_dump_json()
        self._chunk_size = chunk_size

    def setup(self):
        dataset = DatasetConfig.model_validate_json(self._dataset_json)
        self._builder = ExampleBuilder(dataset, labels_required=False)
        self._read = source_format(dataset).read
        self._in_batches = imports_unchanged(dataset)

    def process(self, path: str):
        if self._in_batches:
            start = 0
            for examples, labels in read_tfrecord_batches(path, self._builder, self._chunk_size):
                sources = [f"{path}:{index}" for index in range(start, start + len(examples))]
                yield _Records(sources, examples, labels)
                start += len(examples)
            return
        chunk = _Records([], [], [])
        for index, (_, example) in enumerate(self._read(path, self._builder)):
            chunk.sources.append(f"{path}:{index}")
            chunk.examples.append(example.SerializeToString())
            chunk.labels.append(self._builder.label_of(example))
            if len(chunk) == self._chunk_size:
                yield chunk
                chunk = _Records([], [], [])
        if len(chunk):
            yield chunk


class _LoadedModel:
    """A SavedModel and its `serving_default`, loaded once per process (Beam's `Shared`, as
    Beam's RunInference holds its models): a runner's threads do not each load a copy."""

    def __init__(self, model_dir: str):
        self.saved_model = tf.saved_model.load(model_dir)  # keeps the signature's variables
        self.serve = self.saved_model.signatures[SERVING_SIGNATURE]


class _Predict(beam.DoFn):
    """Runs `serving_default` on batches of records, ahead of the records' reading.

    The model runs in threads of its own, `MODEL_CALLS_IN_FLIGHT` batches at once:
    while it predicts (TensorFlow lets go of the GIL), Beam reads and checks the
    files of the next batch and writes the last, so the work overlaps (on 2 cores
    the reading still takes CPU the model would use). Predictions are handed on in
    the batches' order. The SavedModel loads in a model thread too, while the first
    records are read, once per worker process: its model steps (one per thread of
    a runner with threads) share it. Beam's counters count in Beam's thread, when a
    batch's predictions are handed on.
    """

    def __init__(self, model_dir: str, batch_size: int, model: shared.Shared):
        self._model_dir = model_dir
        self._batch_size = batch_size
        self._model = model
        self._predicted = Metrics.counter(_COUNTER_NAMESPACE, "predictions")
        self._labelled = Metrics.counter(_COUNTER_NAMESPACE, "labelled")
        self._correct = Metrics.counter(_COUNTER_NAMESPACE, "correct")

    def setup(self):
        self._runner = concurrent.futures.ThreadPoolExecutor(
            MODEL_CALLS_IN_FLIGHT, thread_name_prefix="predict"
        )
        load = functools.partial(_LoadedModel, self._model_dir)
        self._loaded = self._runner.submit(self._model.acquire, load, self._model_dir)
        self._pending: collections.deque[concurrent.futures.Future] = collections.deque()

    def process(self, chunks: Sequence[_Records]):
        pending = self._pending
        pending.append(self._runner.submit(self._predict, chunks))
        while len(pending) > MODEL_CALLS_IN_FLIGHT or (pending and pending[0].done()):
            yield from self._handed_on(pending.popleft())

    def finish_bundle(self):
        while self._pending:
            for predictions in self._handed_on(self._pending.popleft()):
                yield GlobalWindows.windowed_value(predictions)

    def teardown(self):
        self._runner.shutdown(cancel_futures=True)

    def _predict(self, chunks: Sequence[_Records]) -> list[Predictions]:
        serve = self._loaded.result().serve
        sources = [source for chunk in chunks for source in chunk.sources]
        examples = [example for chunk in chunks for example in chunk.examples]
        labels = [label for chunk in chunks for label in chunk.labels]
        batches = []
        for start in range(0, len(sources), self._batch_size):
            end = start + self._batch_size
            inputs = {SERVING_INPUT_KEY: tf.constant(examples[start:end])}
            scores = serve(**inputs)[SERVING_OUTPUT_KEY].numpy()
            batches.append(
                Predictions(sources[start:end], examples[start:end], scores, labels[start:end])
            )
        return batches

    def _handed_on(self, predicted: concurrent.futures.Future) -> Iterator[Predictions]:
        for predictions in predicted.result():
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
    model: shared.Shared,
) -> None:
    """Adds the job's steps to `pipeline`: every record of `files` predicted into `output`,
    by the SavedModel in `model_dir`, held per process by `model`."""
    _ = (
        pipeline
        | "ListFiles" >> beam.Create(files)
        | "SpreadFiles" >> beam.Reshuffle()  # a distributed runner reads files in parallel
        | "ReadRecords" >> beam.ParDo(_ReadRecords(dataset, max(batch_size, READ_CHUNK)))
        | "Batch"
        >> beam.BatchElements(  # gathers the records of small files (a photo each)
            min_batch_size=batch_size, max_batch_size=batch_size, element_size_fn=len
        )
        | "Predict" >> beam.ParDo(_Predict(model_dir, batch_size, model))
        | "WritePredictions" >> write_predictions(output, rows)
    )


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

    Raises:
      ConfigError: a bad model path, output extension, or a model whose class count
        is not the dataset's.
      DataFormatError: the data folder is missing or empty, or a record is bad (named
        in one line); `output` is left as it was.
    """
    output_extension(output)
    model_dir = resolve_model_version(model)
    classes = served_class_count(model_dir)
    if classes != dataset.num_classes:
        raise ConfigError(
            f"--model {model_dir}: scores {classes} classes but dataset {dataset.name!r} has "
            f"{dataset.num_classes} (dataset.num_classes); give the dataset it was trained on"
        )
    files = input_files(dataset, data_dir, pattern)
    version = os.path.basename(model_dir)
    rows = RowFormat(dataset.class_names, top_k, int(version) if version.isdigit() else 0)
    options = PipelineOptions(list(beam_args))
    model = shared.Shared()
    with replaced_when_done(output) as partial:
        pipeline = beam.Pipeline(options=options)
        build_pipeline(pipeline, files, dataset, model_dir, rows, partial, batch_size, model)
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
    return BatchResult(
        model_dir,
        output,
        _counter(result, "predictions"),
        _counter(result, "labelled"),
        _counter(result, "correct"),
    )
