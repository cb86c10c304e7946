"""Stopping a run on Ctrl-C (SIGINT) or SIGTERM: promptly, with nothing pushed after it.

Python raises KeyboardInterrupt on SIGINT only if the process started with
SIGINT at its default: a command started in the background by a script (a
non-interactive shell) inherits SIGINT *ignored*, so Ctrl-C reached the run
and did nothing; SIGTERM ends a process with no word at all. Under
`stop_on_signals()` both raise `RunInterrupted` in the main thread wherever it
is, and the signal is remembered, so the Pusher can refuse to start even if a
library swallowed the exception on its way up. A second signal ends the
process at once.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_received: list[signal.Signals] = []


class RunInterrupted(KeyboardInterrupt):
    """A stop signal arrived (a KeyboardInterrupt, so code written for Ctrl-C still works)."""


def received_signal() -> signal.Signals | None:
    """The signal that interrupted this process, if one did under `stop_on_signals()`."""
    return _received[0] if _received else None


def exit_code(signum: signal.Signals) -> int:
    """The shell's code for a process stopped by a signal: 128 + its number (130, 143)."""
    return 128 + int(signum)


def raise_if_interrupted(what: str) -> None:
    """Refuses to start `what` once a stop signal has arrived."""
    if _received:
        raise RunInterrupted(f"{_received[0].name} received: not starting {what}")


def _on_signal(signum: int, frame: object) -> None:
    received = signal.Signals(signum)
    if _received:  # asked again while stopping: stop now, skipping any cleanup
        os._exit(exit_code(received))
    _received.append(received)
    raise RunInterrupted(f"interrupted by {received.name}")


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise `RunInterrupted` (from the main thread only).

    `received_signal()` answers for this block only: it is cleared on entry and exit.
    """
    _received.clear()
    previous = {signum: signal.signal(signum, _on_signal) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _received.clear()
