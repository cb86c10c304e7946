"""A lock on Cloud Storage: one claim object, taken only if absent or abandoned.

An OS file lock (`common/file_lock.py`) dies with its holder; an object store has
none. Here the lock is one object whose every change carries a generation
precondition (`common/gcs_objects.py`), so of two takers at once exactly one wins:

- taking it creates the object only if it is absent, or rewrites a released or
  expired one only at the generation read (a compare-and-swap);
- while held, a thread renews the lease (the expiry inside the object) the same way;
  a holder that died stops renewing, and after `lease_seconds` the next taker may
  take the lock over;
- letting go rewrites it as released, again only at the holder's own generation, so
  a holder whose lease was taken over never clears the new holder's claim.

The object says who holds it (what, host, pid, since when, until when), for whoever waits.
Leases compare wall clocks of different machines: they must agree to well under a lease.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator

from absl import logging

from tpu_pipeline.common import gcs_objects
from tpu_pipeline.common.file_lock import LockBusyError

# A holder renews its lease every third of it; one that stops for a whole lease is dead.
LEASE_SECONDS = 300.0
_POLL_SECONDS = 0.5


def _holder_text(claim: dict) -> str:
    return (
        f"{claim.get('what', '?')} (pid {claim.get('pid', '?')} on {claim.get('host', '?')}, "
        f"started {claim.get('started', '?')})"
    )


class _Claim:
    """This holder's claim: its content and the generation it last wrote."""

    def __init__(self, uri: str, what: str, lease_seconds: float, clock: Callable[[], float]):
        self.uri, self.lease_seconds, self.clock = uri, lease_seconds, clock
        self.content = {
            "what": what,
            "owner": uuid.uuid4().hex,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        }
        self.generation: int | None = None

    def _text(self, released: bool = False) -> str:
        expires = self.clock() + self.lease_seconds
        return json.dumps({**self.content, "expires": expires, "released": released})

    def try_take(self) -> str | None:
        """Takes the lock if it is free; None when taken, else who holds it."""
        generation = gcs_objects.create(self.uri, self._text())
        if generation is None:
            found = gcs_objects.read(self.uri)
            if found is None:
                return "a holder that just let go"  # deleted meanwhile: try again
            text, seen = found
            try:
                claim = json.loads(text)
                free = claim.get("released") or float(claim["expires"]) < self.clock()
            except (ValueError, KeyError, TypeError, AttributeError):
                claim, free = {}, True  # not a claim any holder wrote: cut short, take it
            if not free:
                return _holder_text(claim)
            generation = gcs_objects.replace(self.uri, self._text(), seen)
            if generation is None:
                return "another taker, at the same moment"
        self.generation = generation
        return None

    def renew(self) -> bool:
        """Extends the lease; False when the lock is no longer this holder's."""
        generation = gcs_objects.replace(self.uri, self._text(), self.generation)
        if generation is not None:
            self.generation = generation
        return generation is not None

    def release(self) -> None:
        gcs_objects.replace(self.uri, self._text(released=True), self.generation)


@contextlib.contextmanager
def held_store_lock(
    uri: str,
    what: str,
    wait_seconds: float | None = 0,
    on_wait: Callable[[str], None] | None = None,
    lease_seconds: float = LEASE_SECONDS,
    clock: Callable[[], float] = time.time,
) -> Iterator[None]:
    """Holds the lock object at `uri` (a `gs://` URI) for the block, as `what`.

    Args:
      uri: the lock object.
      what: what the holder does, for the message of whoever waits.
      wait_seconds: how long to wait for another holder: 0 refuses at once, None waits for ever.
      on_wait: told who holds the lock, once, when the first try finds it taken.
      lease_seconds: how long the lock outlives a holder that stopped renewing it.
      clock: the wall clock leases are measured with.

    Raises:
      LockBusyError: the lock was still taken after `wait_seconds`.
    """
    claim = _Claim(uri, what, lease_seconds, clock)
    deadline = None if wait_seconds is None else time.monotonic() + wait_seconds
    holder = claim.try_take()
    if holder is not None and wait_seconds != 0 and on_wait is not None:
        on_wait(holder)
    while holder is not None:
        if deadline is not None and time.monotonic() >= deadline:
            waited = f", still after {wait_seconds:g} s" if wait_seconds else ""
            raise LockBusyError(f"held by {holder}{waited}", holder)
        time.sleep(_POLL_SECONDS)
        holder = claim.try_take()
    stop = threading.Event()

    def keep_renewing() -> None:
        while not stop.wait(lease_seconds / 3):
            if not claim.renew():
                logging.error("%s: the lease of %s was taken over while it worked", uri, what)
                return

    renewer = threading.Thread(target=keep_renewing, name=f"lease {uri}", daemon=True)
    renewer.start()
    try:
        yield
    finally:
        stop.set()
        renewer.join()
        claim.release()
