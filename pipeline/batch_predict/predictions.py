"""Predictions, and how they read in each output format (CSV, JSON lines, PredictionLog).

Every format holds the same fields per input record: `source` (the file and the
record's index in it, `path:index`), `class` (the most probable class index),
`class_name`, `probability`, the top k classes with their names and
probabilities, and `label` where the record has one. CSV flattens the top k
into `top1_class, top1_class_name, top1_probability, top2_...` columns and
leaves `label` empty for a record without one; JSON lines nest them as
`top_k` and leave `label` out. The PredictionLog is what TF Serving's Predict
call would log for the record (its serialized example in, the signature's
`probabilities` out), with the readable fields added as outputs.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import io
import json
import re
from collections.abc import Sequence
from json.encoder import encode_basestring_ascii

import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

from tpu_pipeline.components.serving.export import (
    SERVING_INPUT_KEY,
    SERVING_OUTPUT_KEY,
    SERVING_SIGNATURE,
)

# More decimals than a reader compares; the PredictionLog's `probabilities` keep float32.
PROBABILITY_DECIMALS = 6
# What makes the csv module quote a field: the delimiter, the quote, a line break.
_CSV_SPECIAL = re.compile(r'[,"\r\n]')


@dataclasses.dataclass(frozen=True)
class Predictions:
    """What the model said about a batch of input records, in the records' order.

    The job hands predictions on a batch at a time: per record, the steps between
    the model and the file cost more than a small model itself (digits).
    """

    sources: list[str]  # "path:index"
    examples: list[bytes]  # the serialized tf.Examples fed to serving_default
    probabilities: np.ndarray  # float32, [records, classes]
    labels: list[int | None]

    def __len__(self) -> int:
        return len(self.sources)


def top_k(probabilities: np.ndarray, k: int) -> np.ndarray:
    """Per row of `probabilities`, the `k` most probable class indices, most probable first.

    Ties go to the lower index; `k` beyond the class count lists every class.
    """
    k = min(k, probabilities.shape[-1])
    return np.argsort(-probabilities, axis=-1, kind="stable")[..., :k]


@dataclasses.dataclass(frozen=True)
class RowFormat:
    """Turns predictions into rows with the model's class names and `k` top classes."""

    class_names: tuple[str, ...]
    k: int
    model_version: int = 0  # the PredictionLog's model_spec.version

    def _top(self, batch: Predictions) -> tuple[np.ndarray, np.ndarray]:
        """Per record, its top classes and their probabilities, rounded: [records, ranks]."""
        classes = top_k(batch.probabilities, self.k)
        chosen = np.take_along_axis(batch.probabilities, classes, axis=-1).astype(np.float64)
        return classes, np.round(chosen, PROBABILITY_DECIMALS)

    def _ranked_texts(
        self, batch: Predictions, entries: Sequence[str], template: str
    ) -> list[list[str]]:
        """Per rank, a column over the batch: `template` % (its class's entry of `entries`,
        its probability). The text formats build each line from these, not from fields:
        a fifth of the time the csv and json modules take (digits' 3 ranks)."""
        classes, probabilities = self._top(batch)
        entry = np.array(entries, dtype=object)[classes]
        return [
            [
                template % pair
                for pair in zip(
                    entry[:, rank].tolist(), probabilities[:, rank].tolist(), strict=True
                )
            ]
            for rank in range(classes.shape[-1])
        ]

    def rows(self, batch: Predictions) -> list[dict]:
        """The readable fields of each prediction (JSON lines' objects)."""
        names = self.class_names
        rows = []
        classes, probabilities = (part.tolist() for part in self._top(batch))
        for source, ranks, chances, label in zip(
            batch.sources, classes, probabilities, batch.labels, strict=True
        ):
            ranked = [
                {"class": index, "class_name": names[index], "probability": probability}
                for index, probability in zip(ranks, chances, strict=True)
            ]
            row = {"source": source, **ranked[0], "top_k": ranked}
            if label is not None:
                row["label"] = label
            rows.append(row)
        return rows

    def json_lines(self, batch: Predictions) -> str:
        """One JSON object per prediction, one per line (no newline after the last): `rows`
        as `json.dumps` writes them."""
        if not np.isfinite(batch.probabilities).all():  # json.dumps writes NaN for nan
            return "\n".join(json.dumps(row) for row in self.rows(batch))
        ranked = self._ranked_texts(batch, self._json_entries, '%s, "probability": %s')
        top = ", ".join(["{%s}"] * len(ranked))
        template = f'{{"source": %s, %s, "top_k": [{top}]%s}}'
        sources = [encode_basestring_ascii(source) for source in batch.sources]
        labels = ["" if label is None else f', "label": {label}' for label in batch.labels]
        return "\n".join(
            template % (source, ranks[0], *ranks, label)
            for source, label, *ranks in zip(sources, labels, *ranked, strict=True)
        )

    @functools.cached_property
    def _json_entries(self) -> list[str]:
        """Per class, its `class` and `class_name` members as JSON."""
        return [
            f'"class": {index}, "class_name": {json.dumps(name)}'
            for index, name in enumerate(self.class_names)
        ]

    @functools.cached_property
    def _csv_entries(self) -> list[str]:
        """Per class, its `class` and `class_name` fields as CSV."""
        return [f"{index},{_csv_field(name)}" for index, name in enumerate(self.class_names)]

    def _ranks(self) -> int:
        return min(self.k, len(self.class_names))

    def csv_columns(self) -> list[str]:
        top = [
            f"top{rank}_{field}"
            for rank in range(1, self._ranks() + 1)
            for field in ("class", "class_name", "probability")
        ]
        return ["source", "class", "class_name", "probability", "label", *top]

    def csv_header(self) -> str:
        return _csv_lines([self.csv_columns()])

    def csv_lines(self, batch: Predictions) -> str:
        """One CSV line per prediction under `csv_header` (no newline after the last), quoted
        as the csv module quotes."""
        ranked = self._ranked_texts(batch, self._csv_entries, "%s,%s")
        template = ",".join(["%s"] * (3 + len(ranked)))
        sources = batch.sources
        if _CSV_SPECIAL.search("".join(sources)):
            sources = [_csv_field(source) for source in sources]
        labels = ["" if label is None else label for label in batch.labels]
        return "\n".join(
            template % (source, ranks[0], label, *ranks)
            for source, label, *ranks in zip(sources, labels, *ranked, strict=True)
        )

    def prediction_logs(self, batch: Predictions) -> list[bytes]:
        """Serialized PredictionLogs: TF Serving's Predict request and response per record."""
        return [
            self._prediction_log(example, probabilities, row)
            for example, probabilities, row in zip(
                batch.examples, batch.probabilities, self.rows(batch), strict=True
            )
        ]

    def _prediction_log(self, example: bytes, probabilities: np.ndarray, row: dict) -> bytes:
        request = predict_pb2.PredictRequest(
            model_spec=model_pb2.ModelSpec(signature_name=SERVING_SIGNATURE)
        )
        request.model_spec.version.value = self.model_version
        request.inputs[SERVING_INPUT_KEY].CopyFrom(tf.make_tensor_proto([example]))
        response = predict_pb2.PredictResponse(model_spec=request.model_spec)
        outputs = response.outputs
        outputs[SERVING_OUTPUT_KEY].CopyFrom(tf.make_tensor_proto(probabilities[None]))
        ranked = row["top_k"]
        readable = {
            "source": [row["source"]],
            "top_k_classes": [[r["class"] for r in ranked]],
            "top_k_class_names": [[r["class_name"] for r in ranked]],
            "top_k_probabilities": np.array([[r["probability"] for r in ranked]], np.float32),
        }
        if "label" in row:
            readable["label"] = [row["label"]]
        for name, value in readable.items():
            outputs[name].CopyFrom(tf.make_tensor_proto(value))
        log = prediction_log_pb2.PredictionLog(
            predict_log=prediction_log_pb2.PredictLog(request=request, response=response)
        )
        return log.SerializeToString()


def _csv_field(text: str) -> str:
    """`text` as one CSV field, quoted as the csv module quotes it (only where it must be)."""
    return _csv_lines([[text]]) if _CSV_SPECIAL.search(text) else text


def _csv_lines(rows: Sequence[Sequence[object]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue().removesuffix("\n")
