"""One prediction, and how it reads in each output format (CSV, JSON lines, PredictionLog).

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
class Prediction:
    """What the model said about one input record."""

    source: str  # "path:index"
    example: bytes  # the serialized tf.Example fed to serving_default
    probabilities: np.ndarray  # float32, one per class
    label: int | None


def top_k(probabilities: np.ndarray, k: int) -> list[int]:
    """The `k` most probable class indices, most probable first (ties: lower index first)."""
    k = min(k, len(probabilities))
    return [int(i) for i in np.argsort(-probabilities, kind="stable")[:k]]


@dataclasses.dataclass(frozen=True)
class RowFormat:
    """Turns predictions into rows with the model's class names and `k` top classes."""

    class_names: tuple[str, ...]
    k: int
    model_version: int = 0  # the PredictionLog's model_spec.version

    def row(self, prediction: Prediction) -> dict:
        """The readable fields of one prediction (JSON lines' object)."""
        ranked = [
            {
                "class": index,
                "class_name": self.class_names[index],
                "probability": round(float(prediction.probabilities[index]), PROBABILITY_DECIMALS),
            }
            for index in top_k(prediction.probabilities, self.k)
        ]
        row = {"source": prediction.source, **ranked[0], "top_k": ranked}
        if prediction.label is not None:
            row["label"] = prediction.label
        return row

    def json_line(self, prediction: Prediction) -> str:
        return json.dumps(self.row(prediction))

    def csv_columns(self) -> list[str]:
        ranks = range(1, min(self.k, len(self.class_names)) + 1)
        top = [
            f"top{rank}_{field}"
            for rank in ranks
            for field in ("class", "class_name", "probability")
        ]
        return ["source", "class", "class_name", "probability", "label", *top]

    def csv_header(self) -> str:
        return _csv_line(self.csv_columns())

    def csv_line(self, prediction: Prediction) -> str:
        row = self.row(prediction)
        top = [
            ranked[field]
            for ranked in row["top_k"]
            for field in ("class", "class_name", "probability")
        ]
        fields = ("source", "class", "class_name", "probability")
        return _csv_line([*(row[name] for name in fields), row.get("label", ""), *top])

    def prediction_log(self, prediction: Prediction) -> bytes:
        """A serialized PredictionLog: TF Serving's Predict request and response for the record."""
        request = predict_pb2.PredictRequest(
            model_spec=model_pb2.ModelSpec(signature_name=SERVING_SIGNATURE)
        )
        request.model_spec.version.value = self.model_version
        request.inputs[SERVING_INPUT_KEY].CopyFrom(tf.make_tensor_proto([prediction.example]))
        response = predict_pb2.PredictResponse(model_spec=request.model_spec)
        outputs = response.outputs
        outputs[SERVING_OUTPUT_KEY].CopyFrom(tf.make_tensor_proto(prediction.probabilities[None]))
        row = self.row(prediction)
        ranked = row["top_k"]
        readable = {
            "source": [row["source"]],
            "top_k_classes": [[r["class"] for r in ranked]],
            "top_k_class_names": [[r["class_name"] for r in ranked]],
            "top_k_probabilities": np.array([[r["probability"] for r in ranked]], np.float32),
        }
        if prediction.label is not None:
            readable["label"] = [prediction.label]
        for name, value in readable.items():
            outputs[name].CopyFrom(tf.make_tensor_proto(value))
        log = prediction_log_pb2.PredictionLog(
            predict_log=prediction_log_pb2.PredictLog(request=request, response=response)
        )
        return log.SerializeToString()


def _csv_line(values: Sequence[object]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="").writerow(values)
    return buffer.getvalue()
