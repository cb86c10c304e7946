"""TF_CONFIG decides multi-worker training; a lost worker becomes one clear error."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys

import pytest
import tensorflow as tf
from tensorflow.python.eager import context

from tpu_pipeline.components.device.join_watchdog import killed_unless_joined
from tpu_pipeline.components.device.multi_worker import (
    WorkerLostError,
    configure_coordination,
    lost_worker_is_an_error,
    multi_worker_cluster,
    worker_output_dir,
)

VERTEX_TWO_REPLICAS = {
    "cluster": {"chief": ["host-0:2222"], "worker": ["host-1:2222"]},
    "task": {"type": "worker", "index": 0},
}


@pytest.mark.parametrize(
    "tf_config",
    [
        None,
        "",
        json.dumps({"cluster": {"chief": ["host-0:2222"]}, "task": {"type": "chief", "index": 0}}),
        json.dumps({"cluster": {}, "task": {}}),
    ],
)
def test_no_cluster_or_a_single_replica_is_not_multi_worker(tf_config):
    environ = {} if tf_config is None else {"TF_CONFIG": tf_config}
    assert multi_worker_cluster(environ) is None


def test_a_vertex_chief_and_worker_make_a_cluster():
    cluster = multi_worker_cluster({"TF_CONFIG": json.dumps(VERTEX_TWO_REPLICAS)})
    assert cluster == VERTEX_TWO_REPLICAS["cluster"]


@pytest.mark.parametrize(
    "tf_config, message",
    [
        ("{not json", "TF_CONFIG is not valid JSON"),
        (
            json.dumps({"cluster": {"chief": ["a:1"], "worker": ["b:1"], "ps": ["c:1"]}}),
            "use chief and worker replicas only",
        ),
    ],
)
def test_unusable_tf_config_fails_naming_it(tf_config, message):
    with pytest.raises(ValueError, match=message):
        multi_worker_cluster({"TF_CONFIG": tf_config})


def test_the_coordination_service_waits_the_configured_heartbeat_for_a_silent_task(monkeypatch):
    runtime = context.context()
    # Restored after the test: this process trains on one worker.
    monkeypatch.setattr(runtime, "_coordination_service_config", runtime.coordination_service)
    configure_coordination({"chief": ["host-0:2222"], "worker": ["host-1:2222"]}, 42.5)
    service = runtime.coordination_service
    assert service.heartbeat_timeout_in_ms == 42_500
    # What MultiWorkerMirroredStrategy itself would configure, which it then leaves alone.
    assert service.service_type == "standalone"
    assert service.service_leader == "/job:chief/replica:0/task:0"
    jobs = [(job.name, job.num_tasks) for job in service.coordinated_job_list]
    assert jobs == [("chief", 1), ("worker", 1)]


def test_only_the_chief_writes_into_the_log_dir(tmp_path):
    with worker_output_dir(str(tmp_path), is_chief=True) as chief_dir:
        assert chief_dir == str(tmp_path)
    with worker_output_dir(str(tmp_path), is_chief=False) as scratch:
        assert scratch != str(tmp_path)
        (tmp_path.parent / scratch / "events").write_text("worker logs")
    assert not (tmp_path.parent / scratch).exists()


def test_an_aborted_all_reduce_names_the_lost_worker_and_the_backup():
    aborted = tf.errors.UnavailableError(None, None, "Collective ops aborted: heartbeat timeout")
    with pytest.raises(WorkerLostError, match="2-worker training cluster stopped") as raised:
        with lost_worker_is_an_error(2, "gs://bucket/backup/abc"):
            raise aborted
    assert "resumes from the last finished epoch backed up in gs://bucket/backup/abc" in str(
        raised.value
    )
    assert "heartbeat timeout" in str(raised.value)
    with pytest.raises(tf.errors.UnavailableError):  # one worker: nothing to blame on a peer
        with lost_worker_is_an_error(1, "backup"):
            raise aborted


def _listening_socket() -> socket.socket:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    return server


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_join_watchdog_names_the_silent_task_and_kills_the_waiting_one():
    with _listening_socket() as present:
        cluster = {
            "chief": [f"127.0.0.1:{_closed_port()}"],  # this task: it is not probed
            "worker": [f"127.0.0.1:{present.getsockname()[1]}", f"127.0.0.1:{_closed_port()}"],
        }
        waiting = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        watchdog = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tpu_pipeline.components.device.join_watchdog",
                str(waiting.pid),
                "0.5",
                "chief:0",
            ]
            + [json.dumps(cluster)],
            stdin=subprocess.PIPE,  # left open: the task never joins
            stderr=subprocess.PIPE,
            text=True,
        )
        assert watchdog.wait(timeout=30) == 1
    assert waiting.wait(timeout=10) == -signal.SIGKILL
    message = watchdog.stderr.read()
    assert f"not answering: worker:1 ({cluster['worker'][1]})." in message
    assert "worker:0" not in message.split("Cluster:")[0]  # it answered
    assert "task chief:0 waited 0.5 s for all 3 tasks" in message
    assert json.dumps(cluster) in message
    assert "trainer.worker_join_timeout_s" in message


def test_a_task_that_joins_in_time_is_left_alone():
    with killed_unless_joined({"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]}, "chief:0", 30):
        pass  # joined: the watchdog exits without killing this process
