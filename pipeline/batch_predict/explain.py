"""`predict --explain N`: attribution maps of the N answers a batch job was least sure of.

Inside the job, Beam keeps the N least confident records (`Top.Smallest` over the
top probability, on any runner) and writes them into the job's scratch folder;
after it, the driver maps each one with the same methods and settings as the
Trainer's step (`components/explain/`), on the same `pixels` signature of the
model that predicted them, and writes the folder: `attributions.png` (the
report's picture), `attributions.json` (each record's source, label if any,
class and probability) and `maps.npz`. The folder is the user's to name: it must be
new, empty or one an earlier `--explain` wrote (`common/owned_paths.py`); each file
lands whole, the index after the maps, and a file the user put there stays.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import posixpath

import apache_beam as beam
import numpy as np

from tpu_pipeline.common import fileio
from tpu_pipeline.common.config import DatasetConfig, ExplainConfig
from tpu_pipeline.common.owned_paths import check_claimable, claim_folder, write_owned
from tpu_pipeline.components.explain.choice import Chosen
from tpu_pipeline.components.explain.eval_split import explain_images
from tpu_pipeline.components.explain.store import Attributions, attribution_files
from tpu_pipeline.pipeline.batch_predict.predictions import Predictions

_CANDIDATES_FILE = "least_confident.jsonl"
PICTURE_FILE = "attributions.png"


@dataclasses.dataclass(frozen=True)
class ExplainPlan:
    """How many answers to explain, with which settings, and where the job leaves them."""

    count: int
    settings: ExplainConfig
    scratch: str  # the job's scratch folder

    @property
    def candidates(self) -> str:
        return posixpath.join(self.scratch, _CANDIDATES_FILE)

    def add_to(self, predictions: beam.PCollection) -> None:
        """Adds the N least confident records to the job, written as JSON lines."""
        _ = (
            predictions
            | "ExplainCandidates" >> beam.FlatMap(_records)
            | "LeastConfident" >> beam.combiners.Top.Smallest(self.count, key=_confidence)
            | "WriteCandidates" >> beam.Map(_write_candidates, self.candidates)
        )


def _confidence(record: dict) -> float:
    return max(record["probabilities"])


def _records(predictions: Predictions):
    for index, source in enumerate(predictions.sources):
        yield {
            "source": source,
            "example": base64.b64encode(predictions.examples[index]).decode("ascii"),
            "probabilities": predictions.probabilities[index].tolist(),
            "label": predictions.labels[index],
        }


def _write_candidates(records: list[dict], path: str) -> None:
    with fileio.open(path, "w") as handle:
        handle.write("".join(json.dumps(record) + "\n" for record in records))


def _read_candidates(path: str) -> list[dict]:
    if not fileio.exists(path):  # no record was predicted
        return []
    with fileio.open(path) as handle:
        return [json.loads(line) for line in handle.read().splitlines() if line]


def explain_least_confident(
    plan: ExplainPlan, model_dir: str, dataset: DatasetConfig, destination: str
) -> Attributions:
    """After the job: maps the records it kept and writes them into `destination`."""
    import tensorflow as tf

    from tpu_pipeline.components.images.examples import parse_images
    from tpu_pipeline.components.serving.answers import PixelClassifier

    records = _read_candidates(plan.candidates)
    chosen = []
    for index, record in enumerate(records):
        probabilities = np.asarray(record["probabilities"])
        predicted = int(probabilities.argmax())
        chosen.append(
            Chosen(
                index, record["label"], predicted, float(probabilities[predicted]), record["source"]
            )
        )
    serialized = tf.constant([base64.b64decode(r["example"]) for r in records], tf.string)
    pixels = list(parse_images(serialized, dataset).numpy()) if records else []
    attributions = explain_images(
        PixelClassifier(model_dir), pixels, chosen, dataset, plan.settings
    )
    attributions.settings["least_confident_of_the_job"] = plan.count
    _write_folder(destination, attributions, dataset)
    return attributions


def check_explain_dir(destination: str) -> None:
    """Refuses, before the job runs, a folder `--explain` may not write into."""
    check_claimable(destination, "--explain-dir")


def _write_folder(destination: str, attributions: Attributions, dataset: DatasetConfig) -> None:
    """The store's two files and the picture, each whole, into the claimed `destination`."""
    from tpu_pipeline.pipeline.report.plots import attribution_maps, png_bytes

    claim_folder(destination, "--explain-dir")
    figure = attribution_maps(attributions, list(dataset.class_names))
    files = attribution_files(attributions)
    if figure is not None:
        files = {PICTURE_FILE: png_bytes(figure), **files}
    for name, data in files.items():
        write_owned(posixpath.join(destination, name), data, "--explain-dir")
