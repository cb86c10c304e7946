"""Bounds how long a multi-worker task waits for the others to join, naming who is missing.

`MultiWorkerMirroredStrategy()` blocks until every task of the TF_CONFIG
cluster has connected. TensorFlow 2.16's `cluster_register_timeout_in_ms`
does not bound that wait (a chief started alone with it set to 8 s still
waited after 3 minutes), and the wait is a C++ call that holds Python's
interpreter lock: no Python timer or thread of the same process runs
meanwhile. So the wait is watched from a small separate process (this module,
run with `python -m`; it imports nothing heavy). When the deadline passes
before the task has joined, the watchdog asks each other task's address
whether anything listens there, prints one message naming the tasks that do
not answer and the cluster, and kills the waiting process (SIGKILL:
TensorFlow catches SIGTERM to note a preemption and keeps waiting).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator

PROBE_TIMEOUT_S = 2.0


def task_addresses(cluster: dict) -> dict[str, str]:
    """`job:index` -> `host:port` for every task of a TF_CONFIG cluster."""
    return {
        f"{job}:{index}": address
        for job, addresses in cluster.items()
        for index, address in enumerate(addresses)
    }


def answers(address: str, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """Whether something accepts TCP connections at `host:port` (the task's gRPC server)."""
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except (OSError, ValueError):
        return False
    return True


def missing_tasks_message(cluster: dict, this_task: str, timeout_s: float) -> str:
    """What a task that waited `timeout_s` in vain says: the silent tasks and the cluster."""
    others = task_addresses(cluster)
    others.pop(this_task, None)
    silent = [f"{name} ({address})" for name, address in others.items() if not answers(address)]
    if silent:
        who = f"not answering: {', '.join(silent)}"
    else:
        who = "every other task answers on its port, so one of them is stuck before joining"
    return (
        f"multi-worker training: task {this_task} waited {timeout_s:g} s for all "
        f"{len(others) + 1} tasks of the TF_CONFIG cluster to join; {who}. "
        f"Cluster: {json.dumps(cluster)}. Start every replica of the job (or raise "
        f"trainer.worker_join_timeout_s if they start this slowly)."
    )


@contextlib.contextmanager
def killed_unless_joined(cluster: dict, this_task: str, timeout_s: float) -> Iterator[None]:
    """Kills this process, with a message, if the block has not ended after `timeout_s`."""
    watchdog = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tpu_pipeline.components.device.join_watchdog",
            str(os.getpid()),
            str(timeout_s),
            this_task,
            json.dumps(cluster),
        ],
        stdin=subprocess.PIPE,
    )
    try:
        yield
    finally:
        watchdog.stdin.close()  # end of the wait, however it ended: the watchdog exits
        watchdog.wait()


def main(argv: list[str]) -> int:
    """Waits for stdin to close (the task joined) or the deadline (kills the task)."""
    pid, timeout_s, this_task, cluster = int(argv[0]), float(argv[1]), argv[2], json.loads(argv[3])
    joined, _, _ = select.select([sys.stdin], [], [], timeout_s)
    if joined:
        return 0
    print(missing_tasks_message(cluster, this_task, timeout_s), file=sys.stderr, flush=True)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
