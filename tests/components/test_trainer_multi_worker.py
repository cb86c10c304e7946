"""run_fn on two worker processes (MultiWorkerMirroredStrategy from TF_CONFIG, 127.0.0.1 ports).

This is how a Vertex AI custom job with a chief and a worker replica trains:
each process reads its own shard, both stay in sync, only the chief exports.
One test covers the whole life of such a job: a worker dies after the first
backup, the chief fails within a bounded time saying so, and rerunning both
resumes from the backup and ends with one exported model about as accurate
as one worker's.
"""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys
import time

import pytest

from tests.pipeline.e2e_helpers import run_fn_args, serving_accuracy

pytestmark = pytest.mark.slow

WORKER = """
import json, sys
from tpu_pipeline import components  # Keras 2 before TensorFlow loads
from absl import logging
from tpu_pipeline.common.tfx_api import FnArgs
from tpu_pipeline.components.trainer import run_fn
logging.set_verbosity(logging.INFO)  # the epoch lines
run_fn(FnArgs(**json.loads(sys.argv[1])))
"""
# A dead peer is noticed when its heartbeat is missing this long. Above TensorFlow's
# default 10 s: a loaded test machine can keep a live worker silent for that long.
HEARTBEAT_TIMEOUT_S = 30
FAIL_WITHIN_S = HEARTBEAT_TIMEOUT_S + 60


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


def _start_workers(fn_args: dict, logs: pathlib.Path) -> list[subprocess.Popen]:
    """A chief and a worker, as Vertex AI's two worker pools (TF_CONFIG like Vertex sets it)."""
    chief_port, worker_port = _free_ports(2)
    cluster = {"chief": [f"127.0.0.1:{chief_port}"], "worker": [f"127.0.0.1:{worker_port}"]}
    logs.mkdir(parents=True, exist_ok=True)
    processes = []
    for task in ("chief", "worker"):
        tf_config = {"cluster": cluster, "task": {"type": task, "index": 0}}
        processes.append(
            subprocess.Popen(
                [sys.executable, "-c", WORKER, json.dumps(fn_args)],
                env={**os.environ, "TF_CONFIG": json.dumps(tf_config)},
                stdout=subprocess.DEVNULL,
                stderr=(logs / f"{task}.log").open("w"),
            )
        )
    return processes


def _backed_up(backups: pathlib.Path) -> bool:
    """Whether the chief has written a backup checkpoint yet.

    The checkpoint writer renames and deletes its `*_temp` folders while this looks, and
    pathlib's rglob fails on a folder that vanishes under it: then it is not there yet.
    """
    try:
        return any(backups.rglob("checkpoint"))
    except FileNotFoundError:
        return False


def _wait_for(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_multi_worker_training_survives_a_lost_worker_and_matches_one_worker(digits_run, tmp_path):
    config, _ = digits_run
    serving_dir = tmp_path / "serving"
    trainer = config.trainer.model_copy(update={"worker_heartbeat_timeout_s": HEARTBEAT_TIMEOUT_S})
    fn_args = run_fn_args(config.model_copy(update={"trainer": trainer}), tmp_path)
    backups = tmp_path / "model_run" / "backup"

    # 1. The worker dies once the chief has backed up an epoch: the chief stops, saying why.
    chief, worker = _start_workers(fn_args, tmp_path / "first")
    try:
        _wait_for(lambda: _backed_up(backups), 600, "the first backup")
        worker.kill()
        killed_at = time.monotonic()
        returncode = chief.wait(timeout=FAIL_WITHIN_S)
        seconds_to_fail = time.monotonic() - killed_at
    finally:
        for process in (chief, worker):
            process.kill()
            process.wait()
    chief_log = (tmp_path / "first" / "chief.log").read_text()
    assert returncode != 0
    assert "WorkerLostError" in chief_log and "stopped answering" in chief_log
    assert str(backups) in chief_log  # where the rerun resumes from
    assert not serving_dir.exists()
    print(f"chief failed {seconds_to_fail:.1f} s after the worker was killed")

    # 2. Rerunning both resumes from the backup and exports one model.
    started = time.monotonic()
    processes = _start_workers(fn_args, tmp_path / "rerun")
    for process in processes:
        log = (tmp_path / "rerun" / "chief.log").read_text
        assert process.wait(timeout=600) == 0, log()[-3000:]
    print(f"two-worker rerun took {time.monotonic() - started:.1f} s")
    rerun_log = (tmp_path / "rerun" / "chief.log").read_text()
    assert f"epoch {config.trainer.epochs}/{config.trainer.epochs}" in rerun_log
    assert f"epoch 1/{config.trainer.epochs}:" not in rerun_log  # resumed, not restarted

    info = json.loads((serving_dir / "assets.extra" / "training_info.json").read_text())
    assert info["num_workers"] == 2 and info["num_replicas"] == 2
    assert info["strategy"].startswith("MultiWorkerMirroredStrategy on 2 workers")
    assert info["global_batch_size"] == 2 * config.trainer.per_replica_batch_size
    # One exported model and one set of logs: the worker's scratch folders are gone.
    assert (serving_dir / "saved_model.pb").is_file()
    assert {path.name for path in tmp_path.iterdir()} == {"first", "rerun", "model_run", "serving"}
    assert not list(tmp_path.rglob("workertemp*"))
    # The chief's TensorBoard logs (written once, by the chief): the eval outcomes are the
    # Evaluator's and the attributions the Explainer's, steps of their own.
    assert sorted(path.name for path in (tmp_path / "model_run" / "1").iterdir()) == [
        "run",
        "train",
        "validation",
    ]

    one_worker_model = next((config.pipeline_root / "Trainer" / "model").iterdir())
    one_worker = serving_accuracy(one_worker_model / "Format-Serving", config)
    two_workers = serving_accuracy(serving_dir, config)
    print(f"accuracy: two workers {two_workers:.4f}, one worker {one_worker:.4f}")
    assert two_workers == pytest.approx(one_worker, abs=0.02)


LONE_TASK = """
from tpu_pipeline import components  # Keras 2 before TensorFlow loads
from tpu_pipeline.common.config import TrainerConfig
from tpu_pipeline.components.device.strategy import resolve_strategy
resolve_strategy(TrainerConfig(worker_join_timeout_s=3))
"""


def test_multi_worker_task_started_alone_stops_naming_the_missing_one():
    """The worker of a chief + worker cluster, started without its chief, must not hang."""
    chief_port, worker_port = _free_ports(2)
    cluster = {"chief": [f"127.0.0.1:{chief_port}"], "worker": [f"127.0.0.1:{worker_port}"]}
    tf_config = {"cluster": cluster, "task": {"type": "worker", "index": 0}}
    started = time.monotonic()
    lone = subprocess.run(
        [sys.executable, "-c", LONE_TASK],
        env={**os.environ, "TF_CONFIG": json.dumps(tf_config)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    print(f"lone worker stopped {time.monotonic() - started:.1f} s after it started")
    assert lone.returncode == -9, lone.stderr[-3000:]
    assert "task worker:0 waited 3 s for all 2 tasks" in lone.stderr
    assert f"not answering: chief:0 (127.0.0.1:{chief_port})" in lone.stderr
    assert json.dumps(cluster) in lone.stderr
