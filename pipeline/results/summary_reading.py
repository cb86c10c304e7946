"""Reads a finished run's summary back from ML Metadata: each part's read step in turn.

MLMD is the record TFX itself keeps (`run_record.py`), so the summary a user sees is the
same truth the next run's caching and baseline resolution will use.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

from ml_metadata.proto import metadata_store_pb2

from tpu_pipeline.common.config import DriftConfig, EvaluatorConfig
from tpu_pipeline.pipeline.results.run_record import RunRecord
from tpu_pipeline.pipeline.results.run_summary import PARTS, ComponentResult, RunSummary
from tpu_pipeline.pipeline.results.summary_part import READ_ORDER, marked_methods
from tpu_pipeline.pipeline.wiring.node_ids import SERVED_MODEL_OUTPUTS, NodeIds


@dataclasses.dataclass
class FinishedRun:
    """What the parts read a run from: its ML Metadata, and the settings to read it by.

    `class_names` (every class, in label order) names the per-class metrics and the class
    slices; `evaluator` flags the slices and `drift`, given for a run of spans, judges
    the new span's images against the served model's (None: as the run noted them).
    """

    record: RunRecord
    pipeline_name: str
    class_names: Sequence[str] = ()
    evaluator: EvaluatorConfig | None = None
    drift: DriftConfig | None = None

    @functools.cached_property
    def model(self) -> metadata_store_pb2.Artifact | None:
        """The model the Evaluator judged and the Pusher published (or would have)."""
        return served_model(self.record)

    @functools.cached_property
    def trained(self) -> bool:
        """Whether the Trainer ran (or came from the cache) in this run."""
        return self.record.node(NodeIds.TRAINER).status != "skipped"


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

    `evaluator` flags the slices, by default as the run noted it, else by the defaults;
    `drift`, given for a run of spans (or as the run noted it), judges the new span's
    images against the served model's (FinishedRun).
    """
    summary = RunSummary.without_results(pipeline_name, components, error, log_file)
    run = FinishedRun(record, pipeline_name, class_names, evaluator, drift)
    for _, step in marked_methods(PARTS, READ_ORDER):
        step(summary, run)
    return summary


def served_model(record: RunRecord) -> metadata_store_pb2.Artifact | None:
    """The run's Model that the Evaluator judged and the Pusher published (or would have):
    the ServingPackager's, else the Trainer's; None before the Trainer made one."""
    for node, key in SERVED_MODEL_OUTPUTS:
        models = record.node(node).outputs.get(key)
        if models:
            return models[0]
    return None
