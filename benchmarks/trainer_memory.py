"""One model's training-step memory: the preflight's estimate against what training took.

    python -m benchmarks.trainer_memory MODEL SIDE STEPS BATCH [BATCH ...]

Prints one JSON line: per batch size, the preflight's estimate
(`components/preflight/memory.py`, its parts in bytes) and the measured peak. Run in a
fresh process per model and image size, so one model's allocator pools never count
for the next. The model is built and compiled as the Trainer builds it on this CPU and
its optimizer slots created; the resident set size then holds the weights and slots
the estimate counts exactly. For each batch size (smallest first) `STEPS` steps of
`model.fit` run on one batch of random images held in memory, and the step's memory is
the peak resident set size during them (`VmHWM`, reset through `/proc/self/clear_refs`
first) minus that resident size, plus the weights and slots. The peak includes what
`fit` itself adds (tracing the step, the input's buffers); the growth per example
between two batch sizes leaves those out and is what the activations estimate
predicts. On CPU XLA is off (the Trainer's CPU default), so TensorFlow's executor, not
XLA's buffer assignment, decides what the backward pass keeps.
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tpu_pipeline import common  # noqa: F401 (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from tpu_pipeline.common.config import TrainerConfig  # noqa: E402
from tpu_pipeline.components.device.policy import DEVICE_DEFAULTS  # noqa: E402
from tpu_pipeline.components.models import build_model, compile_model  # noqa: E402
from tpu_pipeline.components.preflight.memory import estimate_memory  # noqa: E402
from tpu_pipeline.components.training.autograph import skip_autograph_for_graph_safe_code  # noqa: E402
from tpu_pipeline.components.training.learning_rate import make_optimizer  # noqa: E402

CLASSES = 10


def _status_bytes(field: str) -> int:
    """A `/proc/self/status` figure (VmRSS, VmHWM) in bytes."""
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def measure(model_name: str, side: int, steps: int, batches: list[int]) -> dict:
    skip_autograph_for_graph_safe_code()
    cpu = DEVICE_DEFAULTS["cpu"]
    model = build_model(model_name, (side, side, 3), CLASSES, cpu.precision)
    optimizer = make_optimizer(TrainerConfig(model=model_name), max(batches), steps, steps)
    compile_model(model, optimizer, cpu.jit_compile, cpu.precision)
    optimizer.build(model.trainable_variables)
    resident = _status_bytes("VmRSS")
    rng = np.random.default_rng(0)
    results = []
    for batch in sorted(batches):
        estimate = estimate_memory(model, batch)
        images = rng.uniform(0, 1, (batch, side, side, 3)).astype(np.float32)
        labels = rng.integers(0, CLASSES, batch)
        data = tf.data.Dataset.from_tensors((images, labels)).repeat()
        pathlib.Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
        model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0)
        step = _status_bytes("VmHWM") - resident
        results.append(
            {
                "batch": batch,
                "estimate": {
                    "parameters": estimate.parameters,
                    "gradients": estimate.gradients,
                    "optimizer_slots": estimate.optimizer_slots,
                    "activations": estimate.activations,
                    "total": estimate.total,
                },
                "measured": step + estimate.parameters + estimate.optimizer_slots,
            }
        )
    return {"model": model_name, "side": side, "resident": resident, "batches": results}


if __name__ == "__main__":
    name, side, steps, *batch_sizes = sys.argv[1], *map(int, sys.argv[2:])
    print(json.dumps(measure(name, side, steps, batch_sizes)))
