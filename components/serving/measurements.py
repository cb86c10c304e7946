"""Where a model folder keeps its TFLite variants and their measurements, and reading them.

Apart from `tflite_variants.py`, which writes them with TensorFlow, so that a
command reading a served version (`serving list`, the run summary) needs no
TensorFlow: the measurements are a JSON file in the folder (`fileio` loads
TensorFlow's file systems only for a path on an object store).
"""

from __future__ import annotations

import json
import os

from tpu_pipeline.common import fileio

TFLITE_DIR = "tflite"
MEASUREMENTS_PATH = os.path.join(TFLITE_DIR, "measurements.json")
SAVED_MODEL = "saved_model"


def read_measurements(model_dir: str) -> dict | None:
    """The measurements a model folder (exported or pushed) carries, or None."""
    path = os.path.join(model_dir, MEASUREMENTS_PATH)
    if not fileio.exists(path):
        return None
    with fileio.open(path) as handle:
        return json.loads(handle.read())


def saved_model_accuracy(model_dir: str) -> float | None:
    """The SavedModel's accuracy on the whole eval split, as the export measured it; or None."""
    measured = read_measurements(model_dir) or {"models": []}
    return next((m["accuracy"] for m in measured["models"] if m["name"] == SAVED_MODEL), None)
