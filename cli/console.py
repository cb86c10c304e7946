"""Keeps the terminal readable: full logs go to a file, progress to the terminal.

TensorFlow, XLA, Beam and TFX print thousands of lines, some from C++ straight
to the process's file descriptors, where Python logging settings cannot reach.
Redirecting descriptors 1 and 2 catches all of it; the user's terminal gets
its own stream for the progress lines and the summary.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import pathlib
import sys
import tempfile
import warnings
from collections.abc import Iterator
from typing import TextIO


def quiet_library_warnings() -> None:
    """Drops warnings users cannot act on; set before TensorFlow is imported."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    for category in (DeprecationWarning, FutureWarning, UserWarning):
        warnings.filterwarnings("ignore", category=category)


def quiet_command() -> None:
    """Keeps a command that is not a run to its own lines; set before TensorFlow is imported.

    TensorFlow's start-up lines (its C++ "Unable to register cuDNN factory" errors on a
    machine without CUDA, its deprecation warnings about TFMA's code) say nothing the
    user can act on; a run keeps them in its log file, and any other command (`compile`,
    `report`, `serving`...) prints only its answer and its own one-line errors.
    """
    quiet_library_warnings()
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"  # C++ errors too: each command says its own
    logging.getLogger("tensorflow").setLevel(logging.ERROR)  # its deprecation warnings


def temp_log_file(command: str) -> pathlib.Path:
    """A new, empty log file of `command`'s own in the temporary folder, created here:
    `tpu-pipeline-<command>-<date>-<time>-<random>.log`.

    The random part and exclusive creation give two commands started in the same second a
    file each, and a name someone else put in the shared folder first (a file, a symlink)
    is never opened: it is skipped, not written through.
    """
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    descriptor, path = tempfile.mkstemp(prefix=f"tpu-pipeline-{command}-{stamp}-", suffix=".log")
    os.close(descriptor)
    return pathlib.Path(path)


@contextlib.contextmanager
def output_to_log_file(log_path: pathlib.Path) -> Iterator[TextIO]:
    """Sends everything the process writes to `log_path`; yields a stream to the terminal's stderr.

    Progress lines go there; results are printed on stdout once the block ends.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    terminal = os.fdopen(os.dup(saved[2]), "w", buffering=1)
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for fd in (1, 2):
            os.dup2(log_fd, fd)
        yield terminal
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, original in saved.items():
            os.dup2(original, fd)
            os.close(original)
        os.close(log_fd)
        terminal.close()
