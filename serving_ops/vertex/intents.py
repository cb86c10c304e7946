"""Intents on Vertex AI: labels on a registry version that name their owner, under a lease.

On Vertex there is no folder every command and run reads and no lock they share,
while every command and the registry Pusher list the entry's versions anyway. So an
action's intent (`serving_ops/protocol.py`) is three labels on the version it is about
(the one rolled back, pinned, restored or blessed; before an upload, the version that
serves until then), written with the same API as the action's first step:

- `tpu_pipeline_intent`: `<action>-<serves>-<seconds>`, what finishing needs: which
  version gets `default` (its id, `self`, `none`, or `new`: one an upload adds, which
  carries its own intent) and when the action started;
- `tpu_pipeline_intent_owner`: who holds it (user, host, process, and a token of the actor);
- `tpu_pipeline_intent_lease`: until when (seconds since the epoch).

Claiming is a read-modify-write on the version's `etag` (`serving_ops/vertex/entry.py`)
whose precondition is that the version carries no intent (or still the very expired
one being taken over): of two actors claiming one version, the second is refused. Two
claiming different versions are told apart by a read after the write: an actor that
then sees another's intent removes its own and steps back. Of two such claims the one
read second always sees the other (the registry answers a read after a write with the
write), so at most one goes on.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import re
from collections.abc import Callable

from tpu_pipeline.common import vertex_types as gca
from tpu_pipeline.serving_ops.protocol import Conflict, Lease, LostLease, Owner
from tpu_pipeline.serving_ops.vertex.entry import LabelChange, Registry

INTENT_LABEL = "tpu_pipeline_intent"
OWNER_LABEL = "tpu_pipeline_intent_owner"
LEASE_LABEL = "tpu_pipeline_intent_lease"
INTENT_LABELS = frozenset({INTENT_LABEL, OWNER_LABEL, LEASE_LABEL})
# Renewed between steps once half is gone, and while an upload or a deploy is waited for.
LEASE_SECONDS = 600
SELF = "self"  # the intent's version that gets `default` is the labelled one
NONE = "none"
NEW = "new"  # an upload adds the version that gets `default`
_LABEL_VALUE = re.compile(r"[^a-z0-9_-]")


def owner_label(owner: Owner) -> str:
    """A label value naming `owner`: user and host, process and token ([a-z0-9_-], 63)."""
    tail = f"-{owner.pid}-{owner.token}"
    who = _LABEL_VALUE.sub("_", owner.name.lower())
    return who[: 63 - len(tail)] + tail


@dataclasses.dataclass(frozen=True)
class Intent:
    """An action's intent as labels on one registry version.

    Attributes:
      action: rollback, pin, restore, bless or push.
      serves: the version that gets `default`: an id, SELF, NONE or NEW.
      since: when the action started (seconds since the epoch).
      version: the version that carries the labels.
      owner: the holder's owner label ("" on an intent written before leases).
      until: when the lease ends (0 on an intent written before leases: `since` plus a lease).
      left_by: in memory only, once taken over: whose it was ("" when it named nobody).
    """

    action: str
    serves: str
    since: int
    version: str
    owner: str = ""
    until: int = 0
    left_by: str | None = None

    def labels(self) -> dict[str, str]:
        return {
            INTENT_LABEL: f"{self.action}-{self.serves}-{self.since}",
            OWNER_LABEL: self.owner,
            LEASE_LABEL: str(self.until),
        }

    @classmethod
    def parse(cls, value: str, version: str = "", labels: dict | None = None) -> Intent | None:
        """The intent an intent label's value holds, None when it is not one of ours."""
        parts = value.split("-")
        if len(parts) != 3 or not parts[2].isdigit():
            return None
        labels = labels or {}
        lease = labels.get(LEASE_LABEL, "")
        return cls(
            parts[0],
            parts[1],
            int(parts[2]),
            version,
            labels.get(OWNER_LABEL, ""),
            int(lease) if lease.isdigit() else 0,
        )

    @classmethod
    def found(cls, version: gca.Model) -> Intent | None:
        """The intent a registry version carries, if any."""
        labels = dict(version.labels)
        return cls.parse(labels.get(INTENT_LABEL, ""), version.version_id, labels)

    def lease(self) -> Lease:
        return Lease(self.since, self.until or self.since + LEASE_SECONDS)

    def serving(self) -> str | None:
        """The version id that gets `default` (None: the action gives it to none)."""
        return {SELF: self.version, NONE: None, NEW: None}.get(self.serves, self.serves)

    def when(self) -> str:
        since = datetime.datetime.fromtimestamp(self.since, datetime.timezone.utc)
        return since.isoformat(timespec="seconds")

    def whose(self) -> str:
        """Whose the action is: its owner, or once taken over, whose it was."""
        return self.owner if self.left_by is None else self.left_by

    def same_as(self, other: Intent | None) -> bool:
        return other is not None and self.labels() == other.labels()


def described(model_name: str | None, intent: Intent) -> str:
    """`<entry>@<id>: the <action> of <when> by <owner>`, as messages name an intent."""
    whose = f" by {intent.whose()}" if intent.whose() else ""
    return f"{model_name}@{intent.version}: the {intent.action} of {intent.when()}{whose}"


class RegistryStore:
    """The protocol's primitives over intent labels on an entry's versions.

    `finish` finishes an abandoned intent (the line saying what it did); `leave` says
    why this actor leaves one to another (None: it finishes it). Both are the actions'
    (`serving_ops/vertex/actions.py`).
    """

    lease_seconds = LEASE_SECONDS

    def __init__(
        self,
        registry: Registry,
        owner: Owner,
        finish: Callable[[Intent], str],
        leave: Callable[[Intent], str | None] = lambda intent: None,
    ):
        self.registry, self.me = registry, owner_label(owner)
        self._finish, self._leave = finish, leave

    def new_intent(self, action: str, serves: str, version: str) -> Intent:
        now = int(self.registry.send.clock())
        return Intent(action, serves, now, version, self.me, now + LEASE_SECONDS)

    def left_over(self) -> list[Intent]:
        if self.registry.model_name is None:
            return []
        return [i for v in self.registry.reread() if (i := Intent.found(v)) is not None]

    def lease_of(self, intent: Intent) -> Lease:
        return intent.lease()

    def is_mine(self, intent: Intent) -> bool:
        return intent.owner == self.me

    def abandoned(self, intent: Intent, now: float) -> bool:
        return intent.lease().expired(now)

    def leaves(self, intent: Intent) -> str | None:
        return self._leave(intent)

    def taken_over(self, intent: Intent, lease: Lease) -> Intent:
        return dataclasses.replace(
            intent, owner=self.me, until=math.ceil(lease.until), left_by=intent.whose()
        )

    def claim(self, intent: Intent, over: Intent | None) -> Intent:
        def unclaimed(version: gca.Model) -> None:
            there = Intent.found(version)
            if (over is None and there is not None) or (
                over is not None and not over.same_as(there)
            ):
                raise Conflict(f"{self.describe(there or intent)}: written first by another actor")

        self.registry.update(intent.version, LabelChange(set=intent.labels()), expect=unclaimed)
        try:
            now = self.registry.send.clock()
            others = [
                i
                for i in self.left_over()
                if not self.is_mine(i) and (not self.abandoned(i, now) or self._leave(i) is None)
            ]
        except (Exception, KeyboardInterrupt):
            self.abandon(intent)  # the read that confirms the claim failed: give it up now
            raise
        if others:  # another actor claimed meanwhile, or left an action to finish first
            self.release(intent)
            raise Conflict(f"{self.describe(others[0])}: claimed at the same time")
        return intent

    def renew(self, intent: Intent, until: float) -> Intent:
        renewed = dataclasses.replace(intent, until=math.ceil(until))
        self.registry.update(
            intent.version, LabelChange(set={LEASE_LABEL: str(renewed.until)}), self._mine(intent)
        )
        return renewed

    def release(self, intent: Intent) -> None:
        try:
            self.registry.update(
                intent.version, LabelChange(removed=INTENT_LABELS), self._mine(intent)
            )
        except LostLease:
            pass  # another actor holds it now: it is theirs to remove

    def abandon(self, intent: Intent) -> None:
        ended = str(int(self.registry.send.clock()))
        self.registry.update(
            intent.version, LabelChange(set={LEASE_LABEL: ended}), self._mine(intent)
        )

    def settle(self, intent: Intent) -> str:
        return self._finish(intent)

    def describe(self, intent: Intent) -> str:
        return described(self.registry.model_name, intent)

    def _mine(self, intent: Intent) -> Callable[[gca.Model], None]:
        def still_mine(version: gca.Model) -> None:
            there = Intent.found(version)
            if there is None or there.owner != self.me or there.since != intent.since:
                holder = f" and {there.owner} holds it now" if there else ""
                raise LostLease(f"{self.describe(intent)}: its lease ran out{holder}")

        return still_mine
