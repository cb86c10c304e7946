"""Data-parallel training over several machines: MultiWorkerMirroredStrategy from TF_CONFIG.

Vertex AI sets `TF_CONFIG` in every replica of a custom job with more than one
replica (the first worker pool is the `chief`, the others `worker`s). Every
replica runs the same `run_fn`; TensorFlow keeps their variables in sync with
an all-reduce per step. Only the chief writes what outlives the job (the
exported model, TensorBoard logs); the others write into scratch folders that
are removed, and wait for the chief's export before they return, because TFX
checks on every replica that the model exists.

A replica that dies must not leave the others waiting forever: TensorFlow's
coordination service notices the missing heartbeat (after
`trainer.worker_heartbeat_timeout_s`, 10 s by default) and aborts the pending
all-reduce; `lost_worker_is_an_error` turns that into one error that says what
happened and how to resume.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Mapping

import tensorflow as tf
from tensorflow.python.distribute import multi_worker_util
from tensorflow.python.eager import context
from tensorflow.tsl.protobuf import coordination_config_pb2

from tpu_pipeline.common.work_dirs import WorkDirs
from tpu_pipeline.components.device.join_watchdog import killed_unless_joined

# Jobs of a TF_CONFIG cluster that train; parameter servers and evaluators do not.
TRAINING_JOBS = ("chief", "worker")
# Where a worker other than the chief writes its checkpoints and logs, which nobody reads.
WORKER_SCRATCH = WorkDirs("worker-scratch", "worker's scratch folder")


class WorkerLostError(RuntimeError):
    """Another replica of a multi-worker training job stopped answering."""


def multi_worker_cluster(environ: Mapping[str, str] = os.environ) -> dict | None:
    """The TF_CONFIG cluster when it has more than one training task, else None.

    Raises:
      ValueError: TF_CONFIG is not JSON, or asks for parameter servers.
    """
    text = environ.get("TF_CONFIG")
    if not text:
        return None
    try:
        tf_config = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"TF_CONFIG is not valid JSON: {error}") from None
    cluster = tf_config.get("cluster") or {}
    if cluster.get("ps"):
        raise ValueError(
            "TF_CONFIG names parameter servers ('ps'); the Trainer trains data-parallel "
            "with MultiWorkerMirroredStrategy: use chief and worker replicas only"
        )
    tasks = sum(len(cluster.get(job, [])) for job in TRAINING_JOBS)
    return cluster if tasks > 1 else None


def this_task(environ: Mapping[str, str] = os.environ) -> str:
    """This process's task in TF_CONFIG, as `job:index` (e.g. `worker:0`)."""
    task = json.loads(environ["TF_CONFIG"]).get("task") or {}
    return f"{task.get('type', 'worker')}:{task.get('index', 0)}"


def connect_workers(
    cluster: dict, join_timeout_s: float, heartbeat_timeout_s: float
) -> tuple[tf.distribute.Strategy, int, bool]:
    """Joins the cluster: returns the strategy, the number of workers, and whether this is chief.

    Must run before anything else initialises TensorFlow's runtime. It blocks
    until every worker has joined; a task still missing after `join_timeout_s`
    stops this process with a message naming it (`components/device/join_watchdog.py`)
    instead of leaving it in a wait that TensorFlow does not let Python bound.
    A task silent for `heartbeat_timeout_s` counts as lost.
    """
    training = {job: cluster[job] for job in TRAINING_JOBS if cluster.get(job)}
    configure_coordination(training, heartbeat_timeout_s)
    with killed_unless_joined(training, this_task(), join_timeout_s):
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
    workers = sum(len(addresses) for addresses in training.values())
    return strategy, workers, strategy.extended.should_checkpoint


def configure_coordination(training: dict, heartbeat_timeout_s: float) -> None:
    """The coordination service MultiWorkerMirroredStrategy sets up, with our heartbeat timeout.

    The strategy configures the service only when nothing has yet, and then with
    TensorFlow's default heartbeat timeout (10 s; collective_all_reduce_strategy.py in
    TF 2.16); this is the same configuration with the timeout set.
    """
    context.context().configure_coordination_service(
        service_type="standalone",
        service_leader=multi_worker_util.coordination_leader(training),
        coordinated_jobs=[
            coordination_config_pb2.CoordinatedJob(name=job, num_tasks=len(addresses))
            for job, addresses in training.items()
        ],
        heartbeat_timeout_in_ms=round(heartbeat_timeout_s * 1000),
    )


@contextlib.contextmanager
def worker_output_dir(log_dir: str, is_chief: bool) -> Iterator[str]:
    """The chief writes to `log_dir`; other workers to a scratch folder removed afterwards
    (and, if the worker was killed, by the next worker on this machine)."""
    if is_chief:
        yield log_dir
        return
    with WORKER_SCRATCH.owned() as scratch:
        yield str(scratch)


def wait_for_all_workers(strategy: tf.distribute.Strategy) -> None:
    """Returns once every worker got here (an all-reduce of one number)."""
    strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.constant(1.0)), axis=None)


@contextlib.contextmanager
def lost_worker_is_an_error(num_workers: int, backup_dir: str) -> Iterator[None]:
    """Turns the aborted all-reduce of a lost worker into a WorkerLostError naming the backup."""
    try:
        yield
    except (tf.errors.UnavailableError, tf.errors.DeadlineExceededError) as error:
        if num_workers < 2:
            raise
        cause = str(error.message).strip().splitlines()[0][:300]
        raise WorkerLostError(
            f"a worker of the {num_workers}-worker training cluster stopped answering, so "
            f"training stopped ({type(error).__name__}: {cause}). Rerun the Trainer with "
            f"all workers: it resumes from the last finished epoch backed up in {backup_dir}"
        ) from error
