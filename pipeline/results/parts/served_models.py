"""The ServingPackager's part: the SavedModel and each TFLite variant, as measured on the
eval split, and where each is served."""

from __future__ import annotations

import pathlib
from typing import TYPE_CHECKING, Any

from tpu_pipeline.components.serving.measurements import read_measurements
from tpu_pipeline.pipeline.results.summary_part import (
    read_step,
    summary_key,
    summary_part,
    text_lines,
)
from tpu_pipeline.serving_ops.local.blessing import trainer_model_dir

if TYPE_CHECKING:
    from tpu_pipeline.pipeline.results.summary_reading import FinishedRun


@summary_part
class ServedModels:
    """What each served model costs and how right it is."""

    serving_variants: list[dict[str, Any]] = summary_key(
        "the SavedModel, then each TFLite variant: name, path (where it is served, or null), "
        "published, reason (why held back), accuracy, accuracy_drop, size_bytes, gzip_bytes, "
        "latency_ms (median single-image, on the CPU that ran the ServingPackager); empty "
        "when the Trainer was skipped or the model carries no measurements",
        example=[
            {
                "name": "saved_model",
                "path": "output/tpu-pipeline-digits/serving_model/1795973625",
                "published": True,
                "reason": "",
                "accuracy": 0.9633,
                "accuracy_drop": 0.0,
                "size_bytes": 1_240_000,
                "gzip_bytes": 1_100_000,
                "latency_ms": 1.92,
            }
        ],
        default_factory=list,
    )

    @read_step(70)  # after the push and any manual blessing: the served folder is final
    def read_served_models(self, run: FinishedRun) -> None:
        if run.trained and run.model is not None:
            self.serving_variants = serving_variants(
                trainer_model_dir(run.model), self.pushed_model
            )

    @text_lines(70)
    def served_model_lines(self) -> list[str]:
        return describe_variants(self.serving_variants)


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
