"""The record a local serving action writes before it changes anything, and removes when done.

Rollback, pin, restore and bless change two stores, the serving folder and ML
Metadata, which no single transaction covers. So the action first writes what
it is about to do (`<run>/.serving-intent.json`: the action, the versions it
moves, who started it and when, and who holds it until when), then changes both,
then removes the record (`serving_ops/protocol.py`). A record still there means a
process died (kill -9, a power cut) or ML Metadata refused (a locked or damaged
store) between the two: the next serving command or run finishes or undoes the
action, saying whose it was.

Whose turn it is: the run folder's lock (`common/run_lock.py`) is held for the whole
action and dropped by the kernel when its holder dies, so whoever holds it knows an
intent written on this machine is abandoned. A run folder shared with another machine
(a network disk) may not share that lock, so the record also carries a lease: an
intent another machine wrote is finished only once its lease has expired.
Written whole or not at all (`common/atomic_file.py`).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import pathlib
import socket
import time

from tpu_pipeline.common.atomic_file import write_text
from tpu_pipeline.serving_ops.protocol import Lease, Owner, operator_name

INTENT_FILE = ".serving-intent.json"
# A local action renews its lease between steps; the serving check is its longest step.
LEASE_SECONDS = 900.0


class UnreadableIntentError(RuntimeError):
    """The intent record is there but cannot be read (edited by hand?)."""


def _now_iso() -> str:
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


@dataclasses.dataclass(frozen=True)
class Intent:
    """What a serving action is about to do, who started it, and who holds it until when.

    Attributes:
      action: rollback, pin, restore or bless.
      version: the VERSION of pin and restore, the version rollback sets aside; None for bless.
      set_aside: the versions the folder step moves into `.rolled_back/`.
      brought_back: the versions it moves back in place.
      reason: the operator's reason.
      model_id: bless: the ML Metadata id of the Model.
      owner: who started it (user@host).
      pid: the process that started it.
      started: when (ISO 8601, local time with its offset).
      holder: the token of the actor that holds it now (its starter, or one that took it over).
      since, until: the holder's lease (seconds since the epoch).
    """

    action: str
    version: str | None
    set_aside: tuple[str, ...] = ()
    brought_back: tuple[str, ...] = ()
    reason: str = ""
    model_id: int | None = None
    owner: str = dataclasses.field(default_factory=operator_name)
    pid: int = dataclasses.field(default_factory=os.getpid)
    started: str = dataclasses.field(default_factory=_now_iso)
    holder: str = ""
    since: float = 0.0
    until: float = 0.0  # a record written before leases existed: expired

    def describe(self) -> str:
        """`serving rollback` of 102 (ops@host, pid 7, started ...), as one-line messages say it."""
        target = f" of model {self.model_id}" if self.action == "bless" else f" of {self.version}"
        who = f"{self.owner}, " if self.owner else ""
        return f"`serving {self.action}`{target} ({who}pid {self.pid}, started {self.started})"

    def held_by(self, owner: Owner, lease: Lease) -> Intent:
        """The same intent, held by `owner` under `lease`."""
        return dataclasses.replace(self, holder=owner.token, since=lease.since, until=lease.until)

    def written_here(self) -> bool:
        """Whether it was started on this machine, whose kernel holds the run folder's lock."""
        return self.owner.rpartition("@")[2] == socket.gethostname()


def new_intent(action: str, version: str | None, owner: Owner, **fields) -> Intent:
    """An intent `owner` starts now, under a fresh lease."""
    now = time.time()
    return Intent(
        action,
        version,
        owner=owner.name,
        pid=owner.pid,
        holder=owner.token,
        since=now,
        until=now + LEASE_SECONDS,
        **fields,
    )


def intent_path(run_dir: pathlib.Path) -> pathlib.Path:
    return run_dir / INTENT_FILE


def write_intent(run_dir: pathlib.Path, intent: Intent) -> None:
    """Records `intent` (whole or not at all) before the action changes anything."""
    write_text(intent_path(run_dir), json.dumps(dataclasses.asdict(intent), indent=1))


def read_intent(run_dir: pathlib.Path) -> Intent | None:
    """The intent a serving action left, or None when none is left.

    Raises:
      UnreadableIntentError: the file is there but is not an intent record.
    """
    path = intent_path(run_dir)
    try:
        fields = json.loads(path.read_text())
        return Intent(
            **{
                **fields,
                "set_aside": tuple(fields["set_aside"]),
                "brought_back": tuple(fields["brought_back"]),
            }
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UnreadableIntentError(
            f"{path} cannot be read ({error}); compare `tpu-pipeline serving list` with what "
            "you meant to do, then remove the file"
        ) from None


def clear_intent(run_dir: pathlib.Path) -> None:
    """Removes the record once both stores agree."""
    intent_path(run_dir).unlink(missing_ok=True)
