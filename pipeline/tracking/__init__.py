"""Each run, logged to the experiment tracker people already look at.

`record` gathers what a finished run logs, the same for every tracker: the resolved
configuration and the defaults chosen from the data as params, per-epoch metric
histories from the Trainer's TensorBoard logs, the final eval metrics overall, per
class and per slice, calibration, the blessing and why, time and peak memory per
component, tags naming the data and code, and the files to keep (report, model card,
summary JSON, the pushed version). `mlflow_log` sends it to MLflow with MLflow's own
client; kubeflow/vertex_experiments.py sends its params and metrics to Vertex AI
Experiments. `track_run` is what `tpu-pipeline run` calls, `track_serving_change` what
`tpu-pipeline serving` calls once an action has changed what serves (`serving_log`): a
tracker that is down or refuses costs one warning line, within a bounded time, never the
run or the serving change.
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from tpu_pipeline.common.config import url_host
from tpu_pipeline.common.timeouts import call_with_timeout

if TYPE_CHECKING:
    from tpu_pipeline.common.config import PipelineConfig
    from tpu_pipeline.pipeline.results.run_summary import RunSummary


@dataclasses.dataclass(frozen=True)
class Tracked:
    """What `track_run` or `track_serving_change` did: lines for the terminal, or the one
    warning line."""

    lines: list[str]
    warning: str | None


def track_run(
    config: PipelineConfig, summary: RunSummary, report_dir: pathlib.Path | None = None
) -> Tracked:
    """Logs the finished run to MLflow when a tracking URI is configured (the `tracking:`
    section, else $MLFLOW_TRACKING_URI); a no-op otherwise.

    `report_dir` holds the run's report (default: the run folder's own, `<run>/report`).

    Takes at most `tracking.budget_seconds`; never raises for the tracker's sake, and
    names the tracker by its host only (a URI may carry credentials).
    """

    def log(uri: str) -> list[str]:
        from tpu_pipeline.pipeline.tracking.mlflow_log import log_to_mlflow
        from tpu_pipeline.pipeline.tracking.record import tracked_run

        tracked = tracked_run(config, summary, report_dir)
        return log_to_mlflow(tracked, uri, config.tracking, config.full_pipeline_name).lines()

    return _tracked(config, "the run was not logged to", "logging the run to", log)


def track_serving_change(config: PipelineConfig, action: str, reason: str = "") -> Tracked:
    """Brings MLflow's model registry in line with the serving folder after the serving
    `action` (bless, rollback, pin, restore) succeeded, when a tracking URI is configured;
    a no-op otherwise. Bounded and never raising, as `track_run`."""

    def log(uri: str) -> list[str]:
        from tpu_pipeline.pipeline.tracking.mlflow_log import mlflow_client
        from tpu_pipeline.pipeline.tracking.serving_log import ServingChange, record_serving

        change = ServingChange(action, reason, str(config.serving_dir))
        with mlflow_client(uri, config.tracking) as client:
            return record_serving(client, change, config.tracking, config.full_pipeline_name)

    return _tracked(
        config, f"serving {action} was not recorded in", "recording the serving change in", log
    )


def _tracked(
    config: PipelineConfig, not_done: str, doing: str, log: Callable[[str], list[str]]
) -> Tracked:
    """`log(uri)`'s lines within `tracking.budget_seconds`, or the one warning line
    (`<not_done> <tracker>: <error>`) whatever it raised."""
    uri = config.tracking.mlflow_uri()
    if uri is None:
        return Tracked([], None)
    from tpu_pipeline.common.webhook import without_secret

    where = tracker_name(uri)
    try:
        lines = call_with_timeout(
            lambda: log(uri), config.tracking.budget_seconds, f"{doing} {where}"
        )
    except Exception as error:  # noqa: BLE001 (a tracker never fails the run)
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
        reason = _shortened(without_secret(first_line, uri))
        return Tracked([], f"{not_done} {where}: {type(error).__name__}: {reason}")
    return Tracked(lines, None)


def _shortened(text: str, most: int = 320) -> str:
    """`text` within `most` characters, its start and its end kept: an HTTP client's error
    names the request first and its cause (`Connection refused`, `timed out`) last."""
    if len(text) <= most:
        return text
    return f"{text[: most * 2 // 3]} ... {text[-(most // 3) :]}"


def tracker_name(uri: str) -> str:
    """The tracker as messages name it: `MLflow at host:port` for a server, else the kind of
    store (`MLflow (sqlite)`); never a path, user or password."""
    scheme = uri.split(":", 1)[0].lower() if ":" in uri else "file"
    if scheme in ("http", "https"):
        return f"MLflow at {url_host(uri)}"
    return f"MLflow ({scheme})"
