"""The summary JSON of a run that stopped before its first component.

A bad configuration, a missing data folder, ImageNet weights out of reach offline or
a held run lock stop `run` within seconds, before TensorFlow and TFX load; a script
reading `--summary-json` still gets a file saying why. It has every field of
`tpu_pipeline.pipeline.results.run_summary.RunSummary` (which imports TFX, ~20 s, so it is not used here;
tests/cli/test_stop_summary.py keeps the two field lists the same).
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

from tpu_pipeline.common.interrupts import RunInterrupted, received_signal
from tpu_pipeline.common.owned_paths import write_owned
from tpu_pipeline.components.example_gen.errors import DataFormatError
from tpu_pipeline.pipeline.results.summary_part import SCHEMA_VERSION


def stop_summary(
    pipeline: str, error: BaseException, chosen_defaults: dict[str, Any] | None
) -> dict[str, Any]:
    """The summary fields of a run that `error` stopped before any component ran."""
    signum = received_signal()
    interrupted = signum.name if isinstance(error, RunInterrupted) and signum else None
    return {
        "schema_version": SCHEMA_VERSION,
        "pipeline": pipeline,
        "succeeded": False,
        "data_rejected": isinstance(error, DataFormatError),
        "error": f"interrupted by {interrupted}"
        if interrupted
        else f"{type(error).__name__}: {error}",
        "components": [],
        "metrics": {},
        "baseline_metrics": None,
        "baseline_comparison": None,
        "blessed": False,
        "blessing_reason": "",
        "pushed_model": None,
        "push_note": "the run stopped before any component",
        "trainer": None,
        "tuning": None,
        "log_file": None,
        "interrupted": interrupted,
        "serving_variants": [],
        "class_names": [],
        "per_class_metrics": [],
        "calibration": None,
        "slices": [],
        "slice_margin": None,
        "slice_min_examples": None,
        "attributions": None,
        "schema_bootstrapped": None,
        "manual_blessing": None,
        "serving_check": None,
        "serving_check_server": None,
        "model_card": None,
        "model_card_error": None,
        "span_shift": None,
        "chosen_defaults": chosen_defaults,
        "peak_rss_bytes": None,
        "peak_rss_measured": None,
        "child_peak_rss_bytes": None,
        "tensorflow_peak_bytes": None,
        "peak_rss_component": None,
    }


def write_summary_json(path: pathlib.Path, text: str) -> None:
    """Writes a summary's JSON `text` to `path` whole, never over a file of the user's."""
    write_owned(path, text, "--summary-json")


def write_stop_summary(
    path: pathlib.Path, pipeline: str, error: BaseException, chosen: dict[str, Any] | None
) -> None:
    """Writes `stop_summary` as JSON to `path` (sorted keys, as RunSummary.to_json)."""
    write_summary_json(
        path, json.dumps(stop_summary(pipeline, error, chosen), indent=2, sort_keys=True)
    )
