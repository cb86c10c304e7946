"""The one protocol every change of serving state follows, on a local folder or on Vertex AI.

A serving action changes stores no single transaction covers: the serving folder
and ML Metadata locally; the Model Registry's labels and aliases, Vertex ML
Metadata and an endpoint on Vertex AI. So every action, whoever calls it, keeps
one order, written here once:

1. **settle**: an intent another actor left is looked at first. One whose lease
   has expired is taken over (with a precondition, so two actors never both take
   it) and finished, or undone where it had changed nothing, in one line saying
   whose it was. A live one makes this actor wait, up to a bound, or refuse.
2. **claim**: the action writes its intent (what it is about to do, its owner, a
   lease) with a precondition: the store holds no intent there, or still the very
   expired one taken over. When another actor wrote first, back to 1.
3. **steps**, in order; the lease is renewed between them once half of it is gone.
   A step that refuses (the store is not as the action needs it) settles the
   intent at once: what had begun is finished, the rest undone. Any other failure
   (a store that stays unavailable, Ctrl-C) ends the lease now, so the next actor
   finishes the action without waiting for the lease to run out; a process killed
   outright leaves its lease to expire.
4. **finish**: the intent is removed, only while it is still this owner's.

A backend is a `Store`: a few primitives over its own means of concurrency (the
local run folder's OS lock, which the kernel drops when its holder dies; the
registry's `etag` preconditions). `serving_ops/local/` and `serving_ops/vertex/`
implement it; the actions there only say what their intent and steps are.
"""

from __future__ import annotations

import dataclasses
import datetime
import getpass
import os
import random
import secrets
import socket
import time
from collections.abc import Callable, Sequence
from typing import Generic, Protocol, TypeVar

Tell = Callable[[str], None]


class OperationError(RuntimeError):
    """A serving action was refused or could not finish: one line saying what and what next."""


class Refused(OperationError):
    """The store is not as the action needs it; what the action had begun is settled."""


class Busy(OperationError):
    """Another actor's intent is live, and waiting for it would exceed the bound."""


class Conflict(Exception):
    """A precondition failed: another actor wrote first. Read again and decide again."""


class LostLease(OperationError):
    """This actor's lease expired and another actor took its intent over."""


def operator_name() -> str:
    """Who acts (user@host), for the notes people read later."""
    return f"{getpass.getuser()}@{socket.gethostname()}"


@dataclasses.dataclass(frozen=True)
class Owner:
    """One actor: a person's command or a Pusher, in one process.

    Attributes:
      name: user@host, as notes show it.
      pid: the process.
      token: unique to this actor (two processes of one user on one host differ).
    """

    name: str
    pid: int
    token: str

    @classmethod
    def current(cls) -> Owner:
        """This process, as a new actor."""
        return cls(operator_name(), os.getpid(), secrets.token_hex(3))

    def describe(self) -> str:
        return f"{self.name}, pid {self.pid}"


@dataclasses.dataclass(frozen=True)
class Lease:
    """Until when an intent's owner is taken to be at work (seconds since the epoch)."""

    since: float
    until: float

    def expired(self, now: float) -> bool:
        return now >= self.until

    def renewed(self, now: float, seconds: float) -> Lease:
        return Lease(self.since, now + seconds)

    def due(self, now: float) -> bool:
        """Whether half of the lease is gone: time to renew it."""
        return now >= self.until - (self.until - self.since) / 2

    def when(self, which: str = "until") -> str:
        moment = self.until if which == "until" else self.since
        stamp = datetime.datetime.fromtimestamp(moment, datetime.timezone.utc)
        return stamp.isoformat(timespec="seconds")


@dataclasses.dataclass
class Patience:
    """How long an actor waits for another's live intent, and the clock it waits by.

    Attributes:
      seconds: the bound (None: for ever; 0: refuse at once).
      clock: seconds since the epoch (tests give their own).
      sleep: waits (tests give their own).
      poll: seconds between two looks at the store.
    """

    seconds: float | None = 120.0
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    poll: float = 5.0
    _deadline: float | None = dataclasses.field(default=None, init=False)
    _started: bool = dataclasses.field(default=False, init=False)

    def start(self) -> None:
        """Starts the bound now (else at the first wait)."""
        self._started = True
        self._deadline = None if self.seconds is None else self.clock() + self.seconds

    def remaining(self) -> float | None:
        if not self._started:
            self.start()
        if self._deadline is None:
            return None
        return max(self._deadline - self.clock(), 0.0)

    def wait_a_little(self, jitter: bool = False) -> bool:
        """Sleeps one poll (less near the bound); False when the bound is reached.

        With `jitter`, a random part of a poll: two actors that claimed at once and both
        stepped back do not claim again in step.
        """
        remaining = self.remaining()
        if remaining is not None and remaining <= 0:
            return False
        pause = self.poll * random.uniform(0.5, 1.5) if jitter else self.poll
        self.sleep(pause if remaining is None else min(pause, remaining))
        return True


IntentT = TypeVar("IntentT")  # a backend's intent


class Store(Protocol[IntentT]):
    """What a backend gives the protocol: its intents, and preconditioned writes of them."""

    lease_seconds: float

    def left_over(self) -> Sequence[IntentT]:
        """The intents the store holds now (any owner's)."""

    def lease_of(self, intent: IntentT) -> Lease:
        """The intent's lease, as its owner wrote it."""

    def is_mine(self, intent: IntentT) -> bool:
        """Whether this actor wrote it."""

    def abandoned(self, intent: IntentT, now: float) -> bool:
        """Whether its owner is provably gone or its lease has expired."""

    def leaves(self, intent: IntentT) -> str | None:
        """Why this actor leaves an abandoned intent to another (it lacks what finishing
        needs), in one line; None when it finishes it."""

    def taken_over(self, intent: IntentT, lease: Lease) -> IntentT:
        """`intent` as this actor holds it once it takes it over: same action, its own lease."""

    def claim(self, intent: IntentT, over: IntentT | None) -> IntentT:
        """Writes `intent` if the store holds no intent for it (`over` None) or still holds
        `over`; returns it as written. Raises Conflict when another actor wrote first."""

    def renew(self, intent: IntentT, until: float) -> IntentT:
        """Extends this actor's lease. Raises LostLease when the intent is no longer its."""

    def release(self, intent: IntentT) -> None:
        """Removes this actor's intent (the action is done, or settled)."""

    def abandon(self, intent: IntentT) -> None:
        """Ends this actor's lease now and leaves the intent for the next actor to finish."""

    def settle(self, intent: IntentT) -> str:
        """Finishes a left-over intent whose steps had begun, or undoes it; the line saying so."""

    def describe(self, intent: IntentT) -> str:
        """The intent in words, whose it is included, for messages."""


@dataclasses.dataclass
class Operation(Generic[IntentT]):
    """One action: its intent and its steps, decided from the store as it is once settled.

    Attributes:
      intent: what the action is about to do, written before anything changes.
      steps: each returns the lines saying what it changed.
      confirm: run once the intent is held, before any step: False when the store changed
        between the decision and the claim, so the action is decided again.
    """

    intent: IntentT
    steps: list[Callable[[], list[str]]]
    confirm: Callable[[], bool] | None = None


def settle_left_over(
    store: Store[IntentT], patience: Patience, tell: Tell, wait_for_live: bool = True
) -> list[IntentT]:
    """Finishes every intent whose owner is gone, once no live one is left; waits for live
    ones, up to the bound.

    An actor at work may hold more than one intent (a claim, and an upload's own) and
    renews only what it can; so nothing is finished while any intent is live.

    Args:
      store: the backend.
      patience: the bound and the clock.
      tell: told each intent finished (whose it was), left, or waited for.
      wait_for_live: False for a command that only reads: a live intent is left to its
        owner (and returned), never finished or waited for.

    Returns:
      The live intents left to their owners (always empty when `wait_for_live`).

    Raises:
      Busy: a live intent outlasted the bound.
    """
    told: set[str] = set()
    while True:
        now = patience.clock()
        found = [i for i in store.left_over() if not store.is_mine(i)]
        live = [i for i in found if not store.abandoned(i, now)]
        if live and not wait_for_live:
            return live
        if not live:  # while an actor is at work, what was left is its to see, not ours
            try:
                for intent in found:
                    left = store.leaves(intent)
                    if left is None:
                        _finish_left_over(store, intent, patience, tell)
                    elif left not in told:
                        told.add(left)
                        tell(left)
            except Conflict:
                continue  # another actor took it over first: read again
            return []
        holder = _live_line(store, live[0])
        if holder not in told and patience.seconds != 0:
            told.add(holder)
            bound = (
                "with no bound"
                if patience.seconds is None
                else f"up to {round(patience.seconds, 1):g} s"
            )
            tell(f"waiting {bound} for {holder}")
        if not patience.wait_a_little():
            waited = round(patience.seconds, 1)
            raise Busy(f"{holder}; still after {waited:g} s: let it finish, or try later")


def _live_line(store: Store[IntentT], intent: IntentT) -> str:
    return f"{store.describe(intent)}, in progress (lease until {store.lease_of(intent).when()})"


def _finish_left_over(
    store: Store[IntentT], intent: IntentT, patience: Patience, tell: Tell
) -> None:
    """Takes an abandoned intent over (precondition: still that intent), settles it, removes it."""
    now = patience.clock()
    lease = Lease(now, now + store.lease_seconds)
    mine = store.claim(store.taken_over(intent, lease), over=intent)
    try:
        tell(store.settle(mine))
    except (Exception, KeyboardInterrupt):
        _abandon(store, mine)
        raise
    store.release(mine)


def carry_out(
    store: Store[IntentT],
    plan: Callable[[], Operation[IntentT]],
    patience: Patience,
    tell: Tell,
) -> list[str]:
    """Runs one action by the protocol (module docstring); the lines saying what changed.

    Args:
      store: the backend.
      plan: decides the action's intent and steps from the store as it is once settled;
        what it raises (a refusal) leaves the store unchanged.
      patience: how long to wait for another actor's live intent.
      tell: told what the protocol does on the way (intents finished, waits).

    Raises:
      Busy: another actor's intent stayed live longer than the bound.
      Refused: a step refused; the intent was settled (what had begun finished).
      OperationError, or the store's own errors: a step failed; the intent stays for
        the next actor, its lease ended.
    """
    patience.start()
    while True:
        settle_left_over(store, patience, tell)
        operation = plan()
        try:
            held = store.claim(operation.intent, over=None)
        except Conflict:
            held = None
        if held is not None:
            try:
                confirmed = operation.confirm is None or operation.confirm()
            except (Exception, KeyboardInterrupt):
                _abandon(store, held)
                raise
            if confirmed:
                break
            store.release(held)  # the store changed before anything was sent: decide again
        if not patience.wait_a_little(jitter=True):
            raise Busy(
                f"{store.describe(operation.intent)}: other actors kept changing the store "
                f"for {round(patience.seconds, 1):g} s; try again"
            )
    lines: list[str] = []
    try:
        for step in operation.steps:
            held = _keep(store, held, patience.clock())
            lines += step()
    except Refused as refused:
        try:
            store.settle(held)
        except Exception as unsettled:
            _abandon(store, held)
            raise type(refused)(f"{refused}; and {unsettled}") from None
        store.release(held)
        raise
    except (Exception, KeyboardInterrupt):
        _abandon(store, held)
        raise
    store.release(held)
    return lines


def _keep(store: Store[IntentT], held: IntentT, now: float) -> IntentT:
    """Renews the lease once half of it is gone."""
    if store.lease_of(held).due(now):
        return store.renew(held, now + store.lease_seconds)
    return held


def keep_alive(
    store: Store[IntentT], held: IntentT, clock: Callable[[], float] = time.time
) -> IntentT:
    """For a long step (an upload, a deploy): renews the lease when due; the intent as held."""
    return _keep(store, held, clock())


def abandon_quietly(store: Store[IntentT], held: IntentT) -> None:
    """Ends the lease of an intent this actor holds besides its claim (an upload's own)."""
    _abandon(store, held)


def _abandon(store: Store[IntentT], held: IntentT) -> None:
    """Ends the lease now so the next actor finishes at once; a store that cannot be
    written now leaves the lease to expire by itself."""
    try:
        store.abandon(held)
    except Exception:  # noqa: BLE001 (the step's own error is the one to report)
        pass
