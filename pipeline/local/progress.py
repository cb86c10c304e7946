"""Shows that long work is alive: a live elapsed-time line on a terminal, plain lines elsewhere.

A 300k-record StatisticsGen or a long first TPU epoch prints nothing for
minutes; on a terminal, a status line with a running clock (redrawn by rich)
shows the run is alive. Logs and pipes get plain lines instead, never
carriage returns: the start, at most one update every `PLAIN_UPDATE_SECONDS`,
and whatever the caller prints when the work ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import TextIO

from rich.console import Console
from rich.live import Live
from rich.text import Text

PLAIN_UPDATE_SECONDS = 10.0
RECORDS_PER_UPDATE = 1000


class LiveStatus:
    """One status line at a time, shown with its elapsed seconds while the work runs."""

    def __init__(self, out: TextIO, live: bool = True):
        """Shows progress on `out`; live only if it is a terminal and `live` (no other writer)."""
        self._out = out
        self._console = Console(file=out, highlight=False) if live and out.isatty() else None
        self._live: Live | None = None
        self._text = ""
        self._started = self._last_plain = 0.0

    def start(self, text: str) -> None:
        """Shows `text` until `stop`: live with a clock on a terminal, else printed once."""
        self.stop()
        self._text = text
        self._started = self._last_plain = time.perf_counter()
        if self._console is None:
            self.print(text)
            return
        self._live = Live(
            console=self._console,
            get_renderable=self._render,
            refresh_per_second=4,
            transient=True,  # the caller's final line replaces it
            redirect_stdout=False,  # stdout and stderr may be the log file: leave them alone
            redirect_stderr=False,
        )
        self._live.start()

    def update(self, text: str) -> None:
        """Changes the status text (e.g. records read so far); off a terminal, now and then."""
        self._text = text
        if self._console is None and time.perf_counter() - self._last_plain >= PLAIN_UPDATE_SECONDS:
            self._last_plain = time.perf_counter()
            self.print(f"{text} ({self.elapsed():.0f} s)")

    def print(self, line: str) -> None:
        """Prints a permanent line (above the status line on a terminal)."""
        if self._live is not None:
            self._live.console.print(line, markup=False, highlight=False, soft_wrap=True)
        else:
            print(line, file=self._out, flush=True)

    def elapsed(self) -> float:
        return time.perf_counter() - self._started

    def stop(self) -> None:
        """Removes the live line, if any."""
        if self._live is not None:
            self._live.stop()
            self._live = None

    def _render(self) -> Text:
        return Text(f"{self._text}  {self.elapsed():6.1f} s")


def read_every_record(
    paths: Sequence[str],
    read: Callable[[str], Iterable[object]],
    status: LiveStatus | None = None,
    action: str = "reading",
) -> int:
    """Reads every record of `paths` with `read`; returns how many there were.

    `status`, if given, shows `<action> file n/N: k records read` while it runs
    (`data import` and `schema infer` both read files this way).
    """
    count = 0
    for number, path in enumerate(paths, 1):
        for _ in read(path):
            if status is not None and count % RECORDS_PER_UPDATE == 0:
                status.update(f"{action} file {number}/{len(paths)}: {count:,} records read")
            count += 1
    return count
