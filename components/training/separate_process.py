"""Training in a process of its own, so the memory it took goes back when it ends.

On CPU, TensorFlow's allocator (oneDNN's pool; oneDNN is on by default on CPUs with
AVX-512 VNNI, BF16 or AMX) keeps every byte a training step held until the process exits: a
cnn_bn at 224x224, batch 16, left 1.5 GiB behind in the pipeline's process, under
the TFLite conversions, the Evaluator and the Pusher that came after it
(docs/benchmarks.md, "Memory of a photo run"). Trained in a child, those bytes
are the child's, returned when it exits.

The child is `python -m tpu_pipeline.components.trainer_child WORK_DIR`: it reads the request
written here and calls `run_fn` with it, which trains and exports there exactly as it
does in-process. Its log records come back over its stdout
and are logged again here (the progress line shows its epochs); TensorFlow's own
output shares this process's stderr. The kernel kills it if this process dies
(`common/child_process.py`); Ctrl-C reaches both, and this side stops it.

`auto` starts a child only where it pays: a fresh interpreter costs about 6 s of
imports, and small images leave megabytes, not gigabytes, behind. On a GPU or TPU
the activations live in the accelerator's memory, and a TPU or a multi-worker
cluster is joined by one process that then also runs the barrier after the export,
so those train in the pipeline's process.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pathlib
import signal
import subprocess
import sys
from typing import Any

import tensorflow as tf
from absl import logging

from tpu_pipeline import components
from tpu_pipeline.common.child_process import start_child, stop_child
from tpu_pipeline.common.config import DatasetConfig, TrainerConfig
from tpu_pipeline.common.tfx_api import FnArgs
from tpu_pipeline.common.work_dirs import WorkDirs
from tpu_pipeline.components.device.multi_worker import multi_worker_cluster
from tpu_pipeline.components.device.strategy import find_tpu_signals

CHILD_MODULE = "tpu_pipeline.components.trainer_child"
# The child's work folder in the temporary folder; one a killed pipeline left is removed by
# the next training child's.
WORK_DIRS = WorkDirs("training", "training work folder")
# auto: a child when one replica's batch holds at least this many input values (16 photos
# of 224x224x3 hold 2.4 million; 128 CIFAR-10 images 0.4 million).
CHILD_MIN_BATCH_VALUES = 2**20
# A child's stdout line that carries one of its log records: the prefix, then [level, message].
LOG_LINE_PREFIX = "tpu-pipeline-log "
REQUEST_FILE, ERROR_FILE = "request.json", "error.json"


class TrainingProcessError(RuntimeError):
    """The training child failed; the message is its own error, or how it ended."""


@dataclasses.dataclass(frozen=True)
class TrainingRequest:
    """What the child needs to train and export as `run_fn` would: TFX's arguments to it."""

    custom_config: dict[str, Any]
    train_files: list[str]
    eval_files: list[str]
    transform_graph_path: str
    eval_steps: int | None
    train_steps: int | None
    serving_model_dir: str  # where the model is exported
    model_run_dir: str  # its logs
    base_model: str | None  # to warm-start from
    hyperparameters: dict[str, Any] | None  # the Tuner's best, if one ran

    @classmethod
    def from_fn_args(cls, fn_args: FnArgs) -> TrainingRequest:
        """The Trainer's TFX arguments, as they are."""
        fields = dataclasses.fields(cls)
        return cls(**{field.name: getattr(fn_args, field.name) for field in fields})

    def fn_args(self) -> FnArgs:
        """The TFX arguments `run_fn` reads, as the child gives them to it."""
        return FnArgs(**dataclasses.asdict(self))

    def write(self, work_dir: pathlib.Path) -> None:
        (work_dir / REQUEST_FILE).write_text(json.dumps(dataclasses.asdict(self)))

    @classmethod
    def read(cls, work_dir: pathlib.Path) -> TrainingRequest:
        return cls(**json.loads((work_dir / REQUEST_FILE).read_text()))


def trains_in_child(config: TrainerConfig, dataset: DatasetConfig) -> bool:
    """Whether `run_fn` trains in a child process (`trainer.training_process`).

    Raises:
      ValueError: `child` asked for in a multi-worker cluster, whose barrier after the
        export needs the process that joined it.
    """
    cluster = multi_worker_cluster()
    if config.training_process == "child" and cluster:
        raise ValueError(
            "trainer.training_process is 'child', but TF_CONFIG names several workers: their "
            "processes join the cluster themselves; set it to 'auto' or 'same'"
        )
    if config.training_process != "auto":
        return config.training_process == "child"
    if config.accelerator not in ("auto", "cpu") or cluster:
        return False
    if config.accelerator == "auto" and (
        find_tpu_signals() or config.tpu_name or tf.config.list_physical_devices("GPU")
    ):
        return False
    batch_values = config.per_replica_batch_size * math.prod(dataset.image_shape)
    return batch_values >= CHILD_MIN_BATCH_VALUES


def _child_env() -> dict[str, str]:
    """This environment, with the folder holding `components` first on the child's path."""
    root = str(pathlib.Path(components.__file__).resolve().parent.parent)
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([root, path]) if path else root}


def relay_line(line: str) -> None:
    """Logs a child's record here again; any other stdout line (a library's print, or a
    record another thread's print broke into) goes to this stderr as it is."""
    if line.startswith(LOG_LINE_PREFIX):
        try:
            level, message = json.loads(line[len(LOG_LINE_PREFIX) :])
        except ValueError:
            pass
        else:
            logging.get_absl_logger().log(level, "%s", message)
            return
    sys.stderr.write(line)


def failure(work_dir: pathlib.Path, returncode: int) -> str:
    """Why the child failed: its own error, else how it ended."""
    error = work_dir / ERROR_FILE
    if error.exists():
        return json.loads(error.read_text())["error"]
    if returncode < 0:
        name = signal.Signals(-returncode).name
        hint = (
            " (the kernel's OOM killer sends it when the machine runs out of memory: "
            "a smaller trainer.per_replica_batch_size or dataset.image_shape needs less)"
            if name == "SIGKILL"
            else ""
        )
        return f"the training process was killed by {name}{hint}"
    return f"the training process ended with exit code {returncode} and no error of its own"


def train_in_child(request: TrainingRequest) -> None:
    """Trains in a child process, which exports the model into `request.serving_model_dir`.

    Raises:
      TrainingProcessError: the child failed (its error), or ended without a result.
    """
    with WORK_DIRS.owned() as work_dir:
        request.write(work_dir)
        sys.stderr.flush()
        child = start_child(
            [sys.executable, "-m", CHILD_MODULE, str(work_dir)],
            _child_env(),
            stdout=subprocess.PIPE,
            stderr=None,
        )
        logging.info("Training in a child process (pid %d)", child.pid)
        try:
            for line in child.stdout:
                relay_line(line)
            returncode = child.wait()
        finally:
            stop_child(child)  # Ctrl-C or an error here: the child must not train on
        if returncode != 0:
            raise TrainingProcessError(failure(work_dir, returncode))
