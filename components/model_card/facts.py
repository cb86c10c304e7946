"""What a model card says, read from the Pusher's input artifacts and the model folder.

Everything comes from what the run recorded: the Model, ModelEvaluation, ModelBlessing
and ExampleStatistics artifacts ML Metadata handed the Pusher (their ids, URIs and
properties), TFMA's output (through `components/evaluation/results.py`), TFDV's
statistics, and the files in the served model (the Trainer's `training_info.json`, the
ServingPackager's variant measurements). Nothing is typed in by hand.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
from typing import Any

import tensorflow_data_validation as tfdv

from tpu_pipeline.common import fileio
from tpu_pipeline.common.config import DatasetConfig, EvaluatorConfig
from tpu_pipeline.components.evaluation import results
from tpu_pipeline.components.evaluation.baseline_test import BaselineComparison
from tpu_pipeline.components.serving.export import TRAINING_INFO_PATH
from tpu_pipeline.components.serving.measurements import read_measurements

STATISTICS_FILE = "FeatureStats.pb"


@dataclasses.dataclass(frozen=True)
class DataSplit:
    """One split the model was trained or evaluated on, as StatisticsGen counted it."""

    name: str  # "train", "eval"
    examples: int
    span: int | None


@dataclasses.dataclass(frozen=True)
class Variant:
    """One served form of the model (the SavedModel or a TFLite file) and how it measured."""

    name: str
    file: str
    accuracy: float | None
    size_bytes: int | None
    latency_ms: float | None
    published: bool
    reason: str  # why it was not published, if it was not


@dataclasses.dataclass(frozen=True)
class Blessing:
    """Whether the model was blessed, by whom or what, and why."""

    blessed: bool
    by: str
    reason: str
    baseline_model_id: int | None  # the last blessed model it was compared with


@dataclasses.dataclass(frozen=True)
class Source:
    """An ML Metadata artifact the card was made from."""

    kind: str  # "Model", "ModelEvaluation", ...
    id: int | None  # None outside ML Metadata (an artifact built by hand)
    uri: str


@dataclasses.dataclass
class CardFacts:
    """Everything a model card holds, gathered once, rendered as JSON and HTML."""

    dataset: DatasetConfig
    slice_rule: EvaluatorConfig
    version: str
    date: str  # ISO date of the push
    version_dir: str
    training: dict[str, Any]  # the model's training_info.json
    data: list[DataSplit]
    metrics: dict[str, float]
    baseline_metrics: dict[str, float] | None
    per_class: list[results.ClassMetrics]
    slices: list[results.SliceMetrics]
    calibration: results.Calibration | None
    variants: list[Variant]
    blessing: Blessing
    serving_check: str | None
    sources: list[Source]
    # The candidate against the last blessed model on the same eval examples (the
    # Evaluator's verdict); None for a first model or an evaluation without a verdict.
    baseline_comparison: BaselineComparison | None = None


def source(kind: str, artifact: Any) -> Source:
    """An artifact as the card cites it: its ML Metadata id and URI."""
    return Source(kind, getattr(artifact, "id", 0) or None, artifact.uri)


def _custom(artifact: Any, name: str) -> Any:
    """A custom property's value, or None where the artifact has none by that name."""
    if name not in artifact.mlmd_artifact.custom_properties:
        return None
    value = artifact.mlmd_artifact.custom_properties[name]
    return getattr(value, value.WhichOneof("value"))


def data_splits(statistics: Any | None) -> list[DataSplit]:
    """Each split's example count and span, from StatisticsGen's output; [] without it."""
    if statistics is None:
        return []
    span = statistics.span if statistics.has_property("span") else None
    splits = []
    for name in json.loads(statistics.split_names or "[]"):
        path = os.path.join(statistics.uri, f"Split-{name}", STATISTICS_FILE)
        if fileio.exists(path):
            dataset = tfdv.load_stats_binary(path).datasets[0]
            splits.append(DataSplit(name, int(dataset.num_examples), span))
    return splits


def variants(model_dir: str) -> list[Variant]:
    """The SavedModel and each TFLite variant the export measured, published or not."""
    measured = read_measurements(model_dir) or {"models": []}
    return [
        Variant(
            name=m["name"],
            file=m.get("file", ""),
            accuracy=m.get("accuracy"),
            size_bytes=m.get("size_bytes"),
            latency_ms=m.get("latency_ms"),
            published=bool(m.get("published", True)),
            reason=m.get("reason", ""),
        )
        for m in measured["models"]
    ]


def training_info(model_dir: str) -> dict[str, Any]:
    """How the model was trained, as the Trainer recorded it with the model; {} if it did not."""
    path = os.path.join(model_dir, TRAINING_INFO_PATH)
    if not fileio.exists(path):
        return {}
    with fileio.open(path) as handle:
        return json.loads(handle.read())


def evaluator_blessing(blessing: Any, evaluation_uri: str, dataset: DatasetConfig) -> Blessing:
    """The Evaluator's ModelBlessing in words: its verdict says why."""
    blessed = bool(_custom(blessing, "blessed"))
    baseline = _custom(blessing, "baseline_model_id")
    return Blessing(
        blessed=blessed,
        by="the Evaluator (TFMA)",
        reason=results.blessing_reason(
            evaluation_uri, blessed, baseline is not None, dataset.class_names
        ),
        baseline_model_id=baseline,
    )


def manual_blessing(
    evaluator_blessing_artifact: Any,
    evaluation_uri: str,
    dataset: DatasetConfig,
    blessed_by: str,
    reason: str,
) -> Blessing:
    """A person's blessing of a model the Evaluator refused: who, why, and the refusal."""
    refused = evaluator_blessing(evaluator_blessing_artifact, evaluation_uri, dataset)
    return Blessing(
        blessed=True,
        by=f"{blessed_by}, by hand (tpu-pipeline serving bless)",
        reason=f"{reason} (the Evaluator had refused it: {refused.reason})",
        baseline_model_id=refused.baseline_model_id,
    )


def gather(
    *,
    model: Any,
    model_dir: str,
    evaluation: Any,
    blessing: Blessing,
    blessing_artifact: Any,
    statistics: Any | None,
    dataset: DatasetConfig,
    slice_rule: EvaluatorConfig,
    version: str,
    version_dir: str,
    serving_check: str | None,
) -> CardFacts:
    """Reads every fact of the card from the artifacts and the model folder.

    Args:
      model, evaluation, blessing_artifact, statistics: the Pusher's input artifacts
        (TFX Artifact objects, with their ML Metadata ids); `statistics` may be None.
      blessing: the blessing in words (`evaluator_blessing` or `manual_blessing`).
      model_dir: the model's serving folder (the Trainer's Format-Serving).
      dataset, slice_rule: the run's dataset and evaluator settings.
      version, version_dir: the pushed version (its number is the push time in seconds,
        `components/serving/publish.py`, whose UTC day the card gives) and where.
      serving_check: how the Pusher's serving check went, in words.
    """
    metrics, baseline_metrics = results.overall_metrics(evaluation.uri)
    matrix = results.confusion_matrix(evaluation.uri, dataset.num_classes)
    verdict = results.read_verdict(evaluation.uri)
    return CardFacts(
        dataset=dataset,
        slice_rule=slice_rule,
        version=version,
        date=datetime.datetime.fromtimestamp(int(version), datetime.timezone.utc)
        .date()
        .isoformat(),
        version_dir=version_dir,
        training=training_info(model_dir),
        data=data_splits(statistics),
        metrics=metrics,
        baseline_metrics=baseline_metrics,
        per_class=results.class_metrics(evaluation.uri, dataset.class_names, matrix),
        slices=results.slice_metrics(evaluation.uri, dataset.class_names, slice_rule),
        calibration=results.calibration(evaluation.uri),
        variants=variants(model_dir),
        blessing=blessing,
        serving_check=serving_check,
        sources=[
            source(kind, artifact)
            for kind, artifact in [
                ("Model", model),
                ("ModelEvaluation", evaluation),
                ("ModelBlessing", blessing_artifact),
                ("ExampleStatistics", statistics),
            ]
            if artifact is not None
        ],
        baseline_comparison=verdict.baseline_comparison if verdict else None,
    )
