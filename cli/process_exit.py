"""How the `tpu-pipeline` command's process ends once its command has returned.

Python ends a process in three steps: it joins the threads still running (telling thread
pools to finish their queues first), runs the `atexit` handlers, then finalizes the
interpreter, clearing every module and freeing TensorFlow's, Beam's and gRPC's objects one
by one. After a `tpu-pipeline run` that last step took 1.9 s of a 37 s run on a 2-core
machine (docs/benchmarks.md#per-run-costs) and does nothing a user can see: the
system takes back the memory, and every file was closed by the handlers. So the command
takes the first two steps as Python would and skips the third.

In-process callers (tests, notebooks) call `tpu_pipeline.cli.main.main`, which returns.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn


def exit_after_cleanup(code: int) -> NoReturn:
    """Joins the running threads, runs the atexit handlers, flushes stdio and exits with `code`."""
    threading._shutdown()  # Python's own first step at exit (its threading module's hook)
    atexit._run_exitfuncs()  # logging's flush, temporary folders, multiprocessing's children
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
