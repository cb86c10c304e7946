"""The record a serving action writes before it changes anything, and removes when done.

Rollback, pin, restore and bless change two stores, the serving folder and ML
Metadata, which no single transaction covers. So the action first writes what
it is about to do (`<run>/.serving-intent.json`: the action, the versions it
moves, who and since when), then changes both, then removes the record. A record
still there means a process died (kill -9, a power cut) or ML Metadata refused
(a locked or damaged store) between the two: the next serving command or run
reads it and finishes or undoes the action (`pipeline/serving_actions.py`).
Written whole or not at all (`common/atomic_file.py`).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import pathlib

from common.atomic_file import write_text

INTENT_FILE = ".serving-intent.json"


class UnreadableIntentError(RuntimeError):
    """The intent record is there but cannot be read (edited by hand?)."""


@dataclasses.dataclass(frozen=True)
class Intent:
    """What a serving action is about to do.

    Attributes:
      action: rollback, pin, restore or bless.
      version: the VERSION of pin and restore, the version rollback sets aside; None for bless.
      set_aside: the versions the folder step moves into `.rolled_back/`.
      brought_back: the versions it moves back in place.
      reason: the operator's reason.
      model_id: bless: the ML Metadata id of the Model.
      pid: the process that wrote it.
      started: when (ISO 8601, local time with its offset).
    """

    action: str
    version: str | None
    set_aside: tuple[str, ...] = ()
    brought_back: tuple[str, ...] = ()
    reason: str = ""
    model_id: int | None = None
    pid: int = dataclasses.field(default_factory=os.getpid)
    started: str = dataclasses.field(
        default_factory=lambda: datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    )

    def describe(self) -> str:
        """`serving rollback` of 102 (pid 7, started ...), as the one-line messages say it."""
        target = f" of model {self.model_id}" if self.action == "bless" else f" of {self.version}"
        return f"`serving {self.action}`{target} (pid {self.pid}, started {self.started})"


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
