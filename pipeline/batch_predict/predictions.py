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
import io
import json
from collections.abc import Sequence

import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

from components.serving.export import SERVING_INPUT_KEY, SERVING_OUTPUT_KEY, SERVING_SIGNATURE

# More decimals than a reader compares; the PredictionLog's `probabilities` keep float32.
PROBABILITY_DECIMALS = 6


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

    def _ranked(self, batch: Predictions) -> tuple[list[list[int]], list[list[float]]]:
        """Per record, its top classes and their probabilities (rounded), as Python lists."""
        classes = top_k(batch.probabilities, self.k)
        chosen = np.take_along_axis(batch.probabilities, classes, axis=-1).astype(np.float64)
        return classes.tolist(), np.round(chosen, PROBABILITY_DECIMALS).tolist()

    def rows(self, batch: Predictions) -> list[dict]:
        """The readable fields of each prediction (JSON lines' objects)."""
        names = self.class_names
        rows = []
        for source, classes, probabilities, label in zip(
            batch.sources, *self._ranked(batch), batch.labels, strict=True
        ):
            ranked = [
                {"class": index, "class_name": names[index], "probability": probability}
                for index, probability in zip(classes, probabilities, strict=True)
            ]
            row = {"source": source, **ranked[0], "top_k": ranked}
            if label is not None:
                row["label"] = label
            rows.append(row)
        return rows

    def json_lines(self, batch: Predictions) -> str:
        """One JSON object per prediction, one per line (no newline after the last)."""
        return "\n".join(json.dumps(row) for row in self.rows(batch))

    def csv_columns(self) -> list[str]:
        ranks = range(1, min(self.k, len(self.class_names)) + 1)
        top = [
            f"top{rank}_{field}"
            for rank in ranks
            for field in ("class", "class_name", "probability")
        ]
        return ["source", "class", "class_name", "probability", "label", *top]

    def csv_header(self) -> str:
        return _csv_lines([self.csv_columns()])

    def csv_lines(self, batch: Predictions) -> str:
        """One CSV line per prediction under `csv_header` (no newline after the last)."""
        names = self.class_names
        lines = []
        for source, classes, probabilities, label in zip(
            batch.sources, *self._ranked(batch), batch.labels, strict=True
        ):
            top = [
                field
                for index, probability in zip(classes, probabilities, strict=True)
                for field in (index, names[index], probability)
            ]
            lines.append([source, *top[:3], "" if label is None else label, *top])
        return _csv_lines(lines)

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


def _csv_lines(rows: Sequence[Sequence[object]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue().removesuffix("\n")
