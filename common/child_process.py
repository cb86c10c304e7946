"""Starts a child process that cannot outlive its parent: the serving check's model server,
the Trainer's training process.

A parent killed with SIGKILL (an operator's `kill -9`, the OOM killer) runs no
`finally`, so a child it started would keep its ports and memory for good.
On Linux the child asks the kernel for SIGKILL when its parent dies
(`prctl(PR_SET_PDEATHSIG)`, kept across `exec`); a parent that died before that
call ran is caught by comparing `getppid()` with the pid that forked it. The
kernel sends the signal when the forking *thread* ends, which is fine here: the
check waits for, and stops, its server in the thread that started it. Elsewhere
(no prctl) the server is stopped only by `stop_server`.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import IO, Any

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_STOP_SECONDS = 10


def die_with(parent_pid: int) -> Callable[[], None] | None:
    """The `preexec_fn` that ties a child to `parent_pid`, or None where prctl does not exist.

    libc's `prctl` is looked up here, in the parent: between fork and exec the child
    only calls it and `getppid`, which take no lock another thread could hold.
    """
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None).prctl  # libc, linked into the Python binary
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    signal_number = int(signal.SIGKILL)

    def set_parent_death_signal() -> None:
        prctl(_PR_SET_PDEATHSIG, signal_number, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl ran: no signal will come
            os._exit(1)

    return set_parent_death_signal


def start_child(
    command: list[str],
    env: dict[str, str],
    stdout: IO | int | None,
    stderr: IO | int | None,
    stdin: IO | int | None = None,
) -> subprocess.Popen:
    """Runs `command`, killed by the kernel if this process dies; `stdout`, `stderr` and
    `stdin` as `subprocess.Popen` takes them (a file, PIPE, STDOUT, DEVNULL, or None to share
    this process's). Pipes are text."""
    # A pipe is text; a byte that is not UTF-8 must not stop the reading.
    piped = subprocess.PIPE in (stdout, stdin)
    extra: dict[str, Any] = {"encoding": "utf-8", "errors": "replace"} if piped else {}
    return subprocess.Popen(
        command,
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        env=env,
        preexec_fn=die_with(os.getpid()),  # takes no lock in the child
        **extra,
    )


def stop_child(child: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL if the child has not exited within a few seconds."""
    if child.poll() is not None:
        return
    child.terminate()
    try:
        child.wait(timeout=_STOP_SECONDS)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
