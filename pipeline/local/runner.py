"""Runs the pipeline on this machine with LocalDagRunner, with progress per component.

LocalDagRunner runs components one after another and logs when each starts and
finishes; a logging handler turns those two lines into a live status line while
the component runs and a result line with its status from ML Metadata
(executed or cached) and its time.

Once the model the Pusher would push is made (the ServingPackager's, or the
Trainer's without one), the serving check's server process starts ahead
(`server_check.start_server_ahead`): its TensorFlow import overlaps the Evaluator
instead of adding to the Pusher's time. One the Pusher did not take is stopped
when the run ends.

The first run of a dataset without a schema runs ExampleGen alone first (a TFX
partial run), bootstraps the schema from its examples with TFDV, says where it
is in one line, and goes on with the whole pipeline: ExampleGen's result comes
from the cache then, and the other components see the new schema.
"""

from __future__ import annotations

import logging
import pathlib
import re
import time
from collections.abc import Callable
from typing import Any, TextIO

from absl import logging as absl_logging

from tpu_pipeline.common.config import ConfigError, PipelineConfig
from tpu_pipeline.common.interrupts import RunInterrupted, received_signal
from tpu_pipeline.common.memory_meter import MemoryMeter, MemoryPeak, highest
from tpu_pipeline.common.tfx_api import LocalDagRunner, metadata, tfx_pipeline
from tpu_pipeline.components.example_gen.notices import NOTICE_PREFIX
from tpu_pipeline.components.models import require_downloadable_weights
from tpu_pipeline.components.serving.server_check import start_server_ahead, stop_server_ahead
from tpu_pipeline.components.training.autograph import skip_autograph_for_graph_safe_code
from tpu_pipeline.pipeline.data_tools.schema_tools import (
    bootstrap_schema,
    check_pixel_feature_type,
    check_provenance_features,
    describe_schema,
    schema_to_bootstrap,
)
from tpu_pipeline.pipeline.local.progress import LiveStatus
from tpu_pipeline.pipeline.local.run_memory import write_run_memory
from tpu_pipeline.pipeline.results.parts.drift import DRIFT_RULES_PROPERTY
from tpu_pipeline.pipeline.results.parts.evaluation import EVALUATOR_RULES_PROPERTY
from tpu_pipeline.pipeline.results.run_record import SCHEMA_BOOTSTRAPPED_PROPERTY, RunRecord
from tpu_pipeline.pipeline.results.run_summary import ComponentResult, RunSummary
from tpu_pipeline.pipeline.results.summary_reading import summarize_run
from tpu_pipeline.pipeline.runs.history import note_run
from tpu_pipeline.pipeline.wiring.data_sources import prepare_data_root
from tpu_pipeline.pipeline.wiring.graph import create_pipeline
from tpu_pipeline.pipeline.wiring.input_fingerprint import (
    InputFingerprint,
    fingerprint_inputs,
    input_patterns,
)
from tpu_pipeline.pipeline.wiring.node_ids import NodeIds
from tpu_pipeline.serving_ops.local.actions import finish_interrupted_action

_RUNNER_LINE = re.compile(r"^Component (?P<id>\S+) is (?P<event>running|finished)\.$")
# components.training.training_logs.EpochLogger's compact line, shown while the Trainer runs.
_EPOCH_LINE = re.compile(r"^epoch \d+/\d+: ")
# components.tuner's one line per finished trial; the trials' epoch lines are not shown.
_TRIAL_LINE = re.compile(r"^trial \S+: ")


class ComponentProgress(logging.Handler):
    """Shows `[n/N] id running` as each component starts, `[n/N] id status seconds` as it ends.

    On a terminal the start line stays live with a running clock. The
    Trainer's one-line-per-epoch log is shown too, indented, so a long
    training shows progress without Keras's per-step bars; the Tuner shows one
    line per trial instead. ExampleGen's notices about odd data (`data: ...`)
    are shown the same way.

    With a `MemoryMeter`, each component's result carries its peak memory and its
    line shows it (`peak 1.9 GiB`); `run_peak` is the run's, gaps between
    components included. `on_finished(id, results)` is called as each one ends.
    """

    def __init__(
        self,
        component_ids: list[str],
        record: RunRecord,
        out: TextIO,
        live: bool = True,
        meter: MemoryMeter | None = None,
        on_finished: Callable[[str, list[ComponentResult]], None] | None = None,
    ):
        super().__init__(level=logging.INFO)
        self._ids = component_ids
        self._record = record
        self._status = LiveStatus(out, live)
        self._meter = meter
        self._on_finished = on_finished
        self._running: tuple[str, float] | None = None
        self._peaks: list[tuple[str | None, MemoryPeak]] = []  # (component or None: a gap)
        self.results: dict[str, ComponentResult] = {}

    def emit(self, log_record: logging.LogRecord) -> None:
        message = log_record.getMessage()
        tuning = self._running is not None and self._running[0] == NodeIds.TUNER
        shown = _TRIAL_LINE.match(message) or message.startswith(NOTICE_PREFIX)
        if shown or (_EPOCH_LINE.match(message) and not tuning):
            self._status.print(f"        {message}")
            return
        match = _RUNNER_LINE.match(message)
        if not match:
            return
        node_id = match["id"]
        # A node that ran earlier in this command (ExampleGen, before a schema was
        # bootstrapped) is shown again only if it runs again instead of coming from the cache.
        again = node_id in self.results
        if match["event"] == "running":
            self._mark(None)  # the moments since the last component ended
            self._running = (node_id, time.perf_counter())
            if not again:
                self._status.start(f"{self._label(node_id)}  running")
            return
        status = self._record.node(node_id).status
        if again and status == "cached":
            self._running = None  # its first result stands
            return
        self.finish(status)

    def _label(self, node_id: str) -> str:
        width = max(len(i) for i in self._ids)
        done = list(self.results)
        number = done.index(node_id) + 1 if node_id in done else len(done) + 1
        return f"[{number:>2}/{len(self._ids)}] {node_id:<{width}}"

    def print(self, line: str) -> None:
        """Prints a line of our own between the components' lines."""
        self._status.print(line)

    @property
    def status(self) -> LiveStatus:
        return self._status

    def finish(self, status: str) -> None:
        """Ends the running component's line with `status`: its own, or failed or interrupted."""
        self._status.stop()
        if self._running is None:
            return
        node_id, started = self._running
        self._running = None
        label = self._label(node_id)
        result = ComponentResult(node_id, status, round(time.perf_counter() - started, 2))
        peak = self._mark(node_id)
        if peak is not None:
            result.add_memory(peak)
        self.results[node_id] = result
        memory = result.describe_memory()
        self._status.print(
            f"{label}  {status:<8} {result.seconds:6.1f} s" + (memory and f"   {memory}")
        )
        if self._on_finished is not None:
            self._on_finished(node_id, list(self.results.values()))

    def _mark(self, component: str | None) -> MemoryPeak | None:
        """Ends a measured interval: the component's (or a gap's, None) peak, kept for the run."""
        if self._meter is None:
            return None
        peak = self._meter.mark()
        self._peaks.append((component, peak))
        return peak

    def run_peak(self) -> tuple[MemoryPeak | None, str | None]:
        """The run's peaks so far, and the component the process's peak was reached in."""
        self._mark(None)  # up to now
        return highest(self._peaks)

    def close(self) -> None:
        """Removes the live line, whatever ended the run."""
        self._status.stop()

    def all_results(self) -> list[ComponentResult]:
        return [self.results.get(i, ComponentResult(i, "skipped", 0.0)) for i in self._ids]


def run_local(
    config: PipelineConfig,
    out: TextIO,
    log_file: str | None = None,
    *,
    inputs: InputFingerprint | None = None,
    chosen_defaults: dict[str, Any] | None = None,
) -> RunSummary:
    """Runs the whole pipeline locally and returns its summary; never raises for a failed run.

    A run stopped by SIGINT or SIGTERM (under `tpu_pipeline.common.interrupts.stop_on_signals`)
    returns too: its summary says what was interrupted.

    Raises:
      ConfigError: the configuration names something there is none of; nothing ran.

    Args:
      config: the run's configuration.
      out: where progress lines go (the user's terminal).
      log_file: where the full logs went, to name in the summary.
      inputs: the fingerprint of the inputs as the run started, noted with the run.
      chosen_defaults: the fields chosen from the data (pipeline/wiring/recipe.py), for the summary.
    """
    config.run_dir.mkdir(parents=True, exist_ok=True)
    connection_config = metadata.sqlite_metadata_connection_config(str(config.metadata_path))
    record = RunRecord(connection_config, config.full_pipeline_name)
    error: BaseException | None = None
    progress: ComponentProgress | None = None
    absl_logger = logging.getLogger("absl")
    verbosity = absl_logging.get_verbosity()
    new_schema = schema_to_bootstrap(config.dataset)  # a schema it cannot write: before any run
    check_pixel_feature_type(config.dataset)
    check_provenance_features(config.dataset)
    bootstrapped: pathlib.Path | None = None
    meter = MemoryMeter()
    meter.start()
    try:
        # A serving action a killed process left half-done: settled before the Resolver reads
        # the baseline from ML Metadata (the CLI holds the run lock for the whole run).
        finish_interrupted_action(config, lambda line: print(f"tpu-pipeline: {line}", file=out))
        data_root = prepare_data_root(config)
        if inputs is None:  # the CLI takes it before; here too, before ExampleGen reads
            inputs = fingerprint_inputs(config, data_root, input_patterns(config.dataset))
        pipeline = create_pipeline(
            config,
            data_root=str(data_root),
            pipeline_root=str(config.pipeline_root),
            serving_dir=str(config.serving_dir),
            metadata_connection_config=connection_config,
        )
        # This machine trains: `imagenet` weights it cannot download stop the run here.
        require_downloadable_weights(config.trainer, config.dataset.image_shape)
        component_ids = [c.id for c in pipeline.components]

        def on_finished(node_id: str, results: list[ComponentResult]) -> None:
            _keep_memory(config, record, node_id, results)
            if _served_model_made(node_id, results, component_ids):
                start_server_ahead()

        # Without a log file the libraries write to the terminal too, and would tear a live line.
        progress = ComponentProgress(
            component_ids,
            record,
            out,
            live=log_file is not None,
            meter=meter,
            on_finished=on_finished,
        )
        absl_logger.addHandler(progress)
        # The runner's start/finish lines are INFO records. Set absl's verbosity flag,
        # not just the logger's level: TensorFlow resets the logger from that flag.
        absl_logging.set_verbosity(absl_logging.INFO)
        # Every component runs in this process: none of them converts our graph code.
        skip_autograph_for_graph_safe_code()
        if new_schema is not None:
            bootstrapped = _bootstrap_schema(pipeline, new_schema, config, record, progress)
        LocalDagRunner().run(pipeline)
    except ConfigError:  # a bad configuration is not a run: the CLI says so with exit code 2
        raise
    except (Exception, RunInterrupted) as raised:  # the summary reports it, the CLI exits with it
        error = raised
        if progress is not None:
            # Beam re-raises a DoFn's KeyboardInterrupt as another type: trust the signal.
            progress.finish("interrupted" if received_signal() else "failed")
    finally:
        stop_server_ahead()  # a run that pushed nothing left it waiting
        if progress is not None:
            progress.close()
            absl_logger.removeHandler(progress)
        absl_logging.set_verbosity(verbosity)
        meter.stop()
    components = progress.all_results() if progress else []
    run_peak = progress.run_peak() if progress else (None, None)
    if bootstrapped is not None:  # kept in MLMD for a report rebuilt after the run
        record.note(NodeIds.SCHEMA_GEN, SCHEMA_BOOTSTRAPPED_PROPERTY, str(bootstrapped))
    # Kept in MLMD so a report rebuilt after the run flags slices by this run's margin.
    record.note(NodeIds.EVALUATOR, EVALUATOR_RULES_PROPERTY, config.evaluator.model_dump_json())
    spans = config.dataset.reads_spans
    if spans:  # so a report made later judges the span by the same thresholds
        record.note(NodeIds.EVALUATOR, DRIFT_RULES_PROPERTY, config.drift.model_dump_json())
    summary = summarize_run(
        record,
        components,
        error,
        log_file,
        config.full_pipeline_name,
        config.dataset.class_names,
        config.evaluator,
        config.drift if spans else None,
    )
    if bootstrapped is not None:  # also when the run stopped before ImportSchemaGen
        summary.schema_bootstrapped = str(bootstrapped)
    summary.add_run_memory(*run_peak)
    summary.chosen_defaults = chosen_defaults
    # What `tpu-pipeline runs` lists and compares, and the report's run history reads.
    try:
        note_run(record, [c.id for c in components], config, summary, inputs)
    except Exception:  # the run's result stands; only `runs` lacks its notes
        logging.getLogger(__name__).exception("Could not note the run in ML Metadata")
    return summary


def _served_model_made(
    node_id: str, results: list[ComponentResult], component_ids: list[str]
) -> bool:
    """Whether `node_id` just made the model a Pusher will check: the ServingPackager's (the
    Trainer's where there is none), made now, not taken from the cache.

    The server then starts while the Evaluator runs, mostly one thread of Python (TFMA),
    rather than beside the ServingPackager, whose conversions use every core.
    """
    makers = [i for i in (NodeIds.TRAINER, NodeIds.SERVING_PACKAGER) if i in component_ids]
    if NodeIds.PUSHER not in component_ids or not makers or node_id != makers[-1]:
        return False
    return any(result.id == node_id and result.status == "executed" for result in results)


def _keep_memory(
    config: PipelineConfig, record: RunRecord, node_id: str, results: list[ComponentResult]
) -> None:
    """Rewrites the run folder's memory file (`local.run_memory`) as a component ends."""
    run_id = record.run_id(node_id)
    if run_id is None:  # nothing reached ML Metadata, so no report can name this run
        return
    try:
        write_run_memory(config.run_dir, run_id, results)
    except OSError as error:  # the run goes on; only a later report lacks the figures
        logging.getLogger(__name__).warning("could not record memory figures: %s", error)


def _bootstrap_schema(
    pipeline: tfx_pipeline.Pipeline,
    path: pathlib.Path,
    config: PipelineConfig,
    record: RunRecord,
    progress: ComponentProgress,
) -> pathlib.Path:
    """Runs ExampleGen alone, then writes the schema TFDV infers from its examples to `path`.

    Raises:
      Whatever ExampleGen raised (bad input files, ...): then nothing is written.
    """
    LocalDagRunner().run(
        pipeline,
        run_options=tfx_pipeline.RunOptions(
            from_nodes=[NodeIds.EXAMPLE_GEN], to_nodes=[NodeIds.EXAMPLE_GEN]
        ),
    )
    (examples,) = record.node(NodeIds.EXAMPLE_GEN).outputs["examples"]
    progress.status.start("inferring a schema from the examples with TFDV")
    schema = bootstrap_schema(examples.uri, path)
    progress.status.stop()
    progress.print(
        f"schema: wrote {path}, inferred by TFDV from this run's examples "
        f"({describe_schema(schema)}); review it before relying on it: widen ranges to what "
        f"your data may hold, check shapes and that {config.dataset.label_feature} covers all "
        f"{config.dataset.num_classes} classes (README: Schemas)"
    )
    return path
