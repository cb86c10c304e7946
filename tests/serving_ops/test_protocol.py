"""The protocol's rules, on the smallest store that keeps them: one slot for one intent.

Both backends (`serving_ops/local/`, `serving_ops/vertex/`) have their own tests; these pin
the order itself: settle, claim, steps, finish, and what each failure leaves.
"""

from __future__ import annotations

import dataclasses

import pytest

from tpu_pipeline.serving_ops import protocol
from tpu_pipeline.serving_ops.protocol import (
    Busy,
    Conflict,
    Lease,
    Operation,
    Owner,
    Patience,
    Refused,
)


@dataclasses.dataclass(frozen=True)
class Note:
    action: str
    holder: str
    since: float
    until: float


class Slot:
    """A store of one intent, compared and set as a whole (a compare-and-set register)."""

    lease_seconds = 60.0

    def __init__(self, owner: Owner, clock):
        self.me, self.clock = owner.token, clock
        self.intent: Note | None = None
        self.log: list[str] = []

    def left_over(self):
        return [self.intent] if self.intent else []

    def lease_of(self, intent):
        return Lease(intent.since, intent.until)

    def is_mine(self, intent):
        return intent.holder == self.me

    def abandoned(self, intent, now):
        return now >= intent.until

    def leaves(self, intent):
        return None

    def taken_over(self, intent, lease):
        return dataclasses.replace(intent, holder=self.me, since=lease.since, until=lease.until)

    def claim(self, intent, over):
        if self.intent != over:
            raise Conflict("written first")
        self.intent = intent
        self.log.append(f"claim {intent.action}")
        return intent

    def renew(self, intent, until):
        if self.intent is None or self.intent.holder != self.me:
            raise protocol.LostLease("taken over")
        self.intent = dataclasses.replace(intent, until=until)
        self.log.append("renew")
        return self.intent

    def release(self, intent):
        if self.intent is not None and self.intent.holder == intent.holder:
            self.intent = None
            self.log.append("release")

    def abandon(self, intent):
        self.intent = dataclasses.replace(intent, until=self.clock())
        self.log.append("abandon")

    def settle(self, intent):
        self.log.append(f"settle {intent.action}")
        return f"finished the {intent.action} of {intent.holder}"

    def describe(self, intent):
        return f"the {intent.action} of {intent.holder}"


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def slot_and_patience(seconds=30.0):
    clock = Clock()
    slot = Slot(Owner("me@here", 1, "me"), clock)
    return slot, Patience(seconds=seconds, clock=clock, sleep=clock.sleep, poll=5), clock


def operation(slot, action="pin", steps=None):
    now = slot.clock()
    return lambda: Operation(Note(action, slot.me, now, now + 60), steps or [lambda: ["did it"]])


def test_an_action_claims_runs_its_steps_in_order_and_finishes():
    slot, patience, _ = slot_and_patience()
    done = []

    lines = protocol.carry_out(
        slot,
        operation(slot, steps=[lambda: done.append(1) or ["one"], lambda: done.append(2) or []]),
        patience,
        print,
    )

    assert (lines, done, slot.log, slot.intent) == (["one"], [1, 2], ["claim pin", "release"], None)


def test_an_abandoned_intent_is_taken_over_finished_and_said_whose_before_the_action():
    slot, patience, clock = slot_and_patience()
    slot.intent = Note("rollback", "other", clock() - 120, clock() - 60)
    told: list[str] = []

    protocol.carry_out(slot, operation(slot), patience, told.append)

    assert told == ["finished the rollback of me"]
    assert slot.log[:3] == ["claim rollback", "settle rollback", "release"]
    assert slot.log[3:] == ["claim pin", "release"]


def test_a_live_intent_is_waited_for_up_to_the_bound_then_refused_and_left_alone():
    slot, patience, clock = slot_and_patience(seconds=30)
    live = Note("rollback", "other", clock(), clock() + 600)
    slot.intent = live
    told: list[str] = []

    with pytest.raises(Busy, match=r"^the rollback of other, in progress .*still after 30 s"):
        protocol.carry_out(slot, operation(slot), patience, told.append)

    assert slot.intent == live and slot.log == []
    assert told == [
        f"waiting up to 30 s for the rollback of other, in progress (lease until "
        f"{Lease(0, live.until).when()})"
    ]
    assert clock() == 1030  # it waited the bound, by the store's clock


def test_a_live_intent_that_ends_while_waited_for_lets_the_action_go_on():
    slot, patience, clock = slot_and_patience(seconds=120)
    slot.intent = Note("rollback", "other", clock(), clock() + 20)

    protocol.carry_out(slot, operation(slot), patience, lambda line: None)

    assert slot.log == ["claim rollback", "settle rollback", "release", "claim pin", "release"]


def test_a_command_that_only_reads_never_finishes_or_waits_for_a_live_intent():
    slot, patience, clock = slot_and_patience()
    live = Note("rollback", "other", clock(), clock() + 600)
    slot.intent = live

    assert protocol.settle_left_over(slot, patience, print, wait_for_live=False) == [live]
    assert slot.intent == live and clock() == 1000


def test_a_refusing_step_settles_the_intent_and_a_failing_one_ends_its_lease():
    slot, patience, clock = slot_and_patience()

    def refuses():
        raise Refused("not pinned: the candidate failed the serving check")

    with pytest.raises(Refused, match="^not pinned"):
        protocol.carry_out(slot, operation(slot, steps=[refuses]), patience, print)
    assert slot.log == ["claim pin", "settle pin", "release"] and slot.intent is None

    slot.log.clear()

    def fails():
        raise RuntimeError("the store is locked")

    with pytest.raises(RuntimeError, match="locked"):
        protocol.carry_out(slot, operation(slot, steps=[fails]), patience, print)
    assert slot.log == ["claim pin", "abandon"]
    assert slot.abandoned(slot.intent, clock())  # the next actor finishes it without waiting


def test_a_lease_is_renewed_between_steps_once_half_of_it_is_gone():
    slot, patience, clock = slot_and_patience()

    def slow_step():
        clock.sleep(40)  # more than half of the 60 s lease
        return []

    protocol.carry_out(slot, operation(slot, steps=[slow_step, lambda: []]), patience, print)

    assert slot.log == ["claim pin", "renew", "release"]


def test_a_decision_the_claim_shows_stale_is_made_again():
    slot, patience, _ = slot_and_patience()
    plans = []

    def plan():
        plans.append(len(plans))
        made = operation(slot)()
        return Operation(made.intent, made.steps, confirm=lambda: len(plans) > 1)

    protocol.carry_out(slot, plan, patience, print)

    assert plans == [0, 1]
    assert slot.log == ["claim pin", "release", "claim pin", "release"]
