"""How the run ended and what ran: the local runner's (or the Vertex AI job's) own record.

Set when the summary is made (`RunSummary.without_results`), before anything the
components wrote is read.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tpu_pipeline.common.interrupts import received_signal
from tpu_pipeline.components.data_checks.anomalies import DataRejectedError
from tpu_pipeline.components.example_gen.errors import DataFormatError
from tpu_pipeline.pipeline.results.parts.memory import MeasuredMemory
from tpu_pipeline.pipeline.results.summary_part import summary_key, summary_part, text_lines


@dataclasses.dataclass
class ComponentResult(MeasuredMemory):
    """One component of the run, in pipeline order, as it ran; MeasuredMemory's figures are
    its own."""

    id: str = summary_key("the component's id (`ExampleGen`, `Trainer`, ...)", example="Trainer")
    status: str = summary_key(
        "`executed`, `cached`, `failed`, `interrupted` or `skipped`", example="executed"
    )
    seconds: float = summary_key("how long it ran", example=41.7)


@summary_part
class Outcome:
    """How the run ended, and each component as it ran: the runner's own record."""

    pipeline: str = summary_key(
        "the pipeline's full name, `<pipeline_name>-<dataset name>`",
        example="tpu-pipeline-digits",
    )
    succeeded: bool = summary_key(
        "true when the run ended without an error and was not interrupted, blessed or not "
        "(read `blessed`)",
        example=True,
    )
    data_rejected: bool = summary_key(
        "true when the data was rejected (exit code 3): bad input files, a data folder "
        "missing or without matching files, data that breaks the schema, or a label mix "
        "that drifted",
        example=False,
    )
    error: str | None = summary_key(
        "why the run failed: `<ExceptionType>: <message>`, or `interrupted by <signal> ...`",
        null="the run did not fail",
        example="DataRejectedError: ExampleValidator found anomalies in the train split",
    )
    components: list[ComponentResult] = summary_key(
        "each component of the pipeline, in order, as it ran; empty for a run stopped "
        "before its first component",
        example=[
            {
                "id": "Trainer",
                "status": "executed",
                "seconds": 41.7,
                "peak_rss_bytes": 1_932_735_283,
                "peak_rss_measured": "high_water_mark",
                "child_peak_rss_bytes": None,
                "tensorflow_peak_bytes": {"CPU:0": 402_653_184},
            }
        ],
    )
    log_file: str | None = summary_key(
        "the run's log file (`<run>/logs/run-<time>.log`)",
        null="with `--verbose` (the logs went to the terminal), and for a run stopped before "
        "any component",
        example="output/tpu-pipeline-digits/logs/run-20261205-162655.log",
    )
    interrupted: str | None = summary_key(
        "the signal that stopped the run, and the component it stopped in",
        null="the run was not interrupted",
        example="SIGINT during Trainer",
        default=None,
    )

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

    @text_lines(90)
    def log_lines(self) -> list[str]:
        return [f"logs: {self.log_file}"] if self.log_file else []


def outcome_of(
    pipeline: str,
    components: list[ComponentResult],
    error: BaseException | None,
    log_file: str | None,
) -> dict[str, Any]:
    """The Outcome keys of a run that `error` (None: nothing) ended, as keyword arguments."""
    signum = received_signal()
    interrupted = None
    if signum is not None:  # whatever exception a library turned the interrupt into
        where = next((c.id for c in components if c.status == "interrupted"), None)
        interrupted = f"{signum.name} during {where}" if where else signum.name
    error_text = f"{type(error).__name__}: {error}" if error else None
    return {
        "pipeline": pipeline,
        "succeeded": error is None and interrupted is None,
        "data_rejected": isinstance(error, (DataRejectedError, DataFormatError))
        and interrupted is None,
        "error": f"interrupted by {interrupted}" if interrupted else error_text,
        "components": components,
        "log_file": log_file,
        "interrupted": interrupted,
    }
