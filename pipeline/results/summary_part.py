"""What a part of the run summary is: a dataclass of the keys one room of the pipeline produces.

The summary grew a field with every feature, all in one file. Now each room (the
Trainer, the Evaluator, the Pusher, ...) owns a part in `pipeline/results/parts/`: its
keys, how they are read from a finished run and the lines they print. `RunSummary`
(`run_summary.py`) inherits every part it finds there, so its JSON stays one flat
object with today's keys, and a new feature adds a part (a module there) without
editing a central list. Each key says what it holds, when it is null and an example
(`summary_key`): the JSON reference (`docs/reference/summary-json.md`) is generated
from that.

This module imports nothing heavy: `cli/stop_summary.py` takes `SCHEMA_VERSION` from it
before TensorFlow loads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

# The summary JSON's `schema_version`: raised when a key is renamed, removed or changes
# meaning (a script checks it); adding a key keeps it.
SCHEMA_VERSION = 1
# The field metadata key `summary_key` writes its KeyDoc under.
KEY_DOC = "summary_key"
# The attributes `read_step` and `text_lines` mark a part's methods with.
READ_ORDER = "_summary_read_order"
TEXT_ORDER = "_summary_text_order"
STOP_STEP = "_summary_stop_step"

_PARTS: list[type] = []
Part = TypeVar("Part", bound=type)
Method = TypeVar("Method", bound=Callable[..., Any])


@dataclasses.dataclass(frozen=True)
class KeyDoc:
    """What the reference says of one key of the summary JSON."""

    holds: str  # what the key holds, for a person reading the JSON
    null: str | None  # when the key is null; None: never
    example: Any  # a value as the JSON holds it


def summary_key(
    holds: str,
    *,
    example: Any,
    null: str | None = None,
    default: Any = dataclasses.MISSING,
    default_factory: Any = dataclasses.MISSING,
) -> Any:
    """A dataclass field of a summary part, with what the JSON reference says of its key."""
    return dataclasses.field(
        default=default,
        default_factory=default_factory,
        metadata={KEY_DOC: KeyDoc(" ".join(holds.split()), null, example)},
    )


def key_doc(field: dataclasses.Field) -> KeyDoc | None:
    """The KeyDoc `summary_key` gave a field, None for a field declared without it."""
    return field.metadata.get(KEY_DOC)


def summary_part(cls: Part) -> Part:
    """Makes `cls` a dataclass (keyword-only: parts combine in any order) and a part of
    every RunSummary."""
    part = dataclasses.dataclass(kw_only=True)(cls)
    _PARTS.append(part)
    return part


def registered_parts() -> tuple[type, ...]:
    """The parts registered so far, by module and name (whatever order they were imported in)."""
    return tuple(sorted(_PARTS, key=lambda part: (part.__module__, part.__qualname__)))


def read_step(order: int) -> Callable[[Method], Method]:
    """Marks `method(self, run)` as the step that reads the part's keys from a finished run
    (`summary_reading.FinishedRun`). Steps run by `order`, lowest first, so a step may use
    what earlier steps read: `self` is the whole summary, every part's keys on it."""

    def mark(method: Method) -> Method:
        setattr(method, READ_ORDER, order)
        return method

    return mark


def text_lines(order: int) -> Callable[[Method], Method]:
    """Marks `method(self) -> list[str]` as lines of the printed summary, placed by `order`
    among every part's lines (lowest first)."""

    def mark(method: Method) -> Method:
        setattr(method, TEXT_ORDER, order)
        return method

    return mark


def stop_step(method: Method) -> Method:
    """Marks `method(self, error)` as what the part says of a run that `error` (or None)
    ended, before anything of the run is read: `RunSummary.without_results` runs it."""
    setattr(method, STOP_STEP, True)
    return method


def marked_methods(parts: tuple[type, ...], mark: str) -> list[tuple[Any, Callable[..., Any]]]:
    """Every method the parts declare with `mark`, with the mark's value, sorted by it (a
    part's own methods only: each part's are called, whatever another part names alike)."""
    found = [
        (getattr(method, mark), method)
        for part in parts
        for method in vars(part).values()
        if callable(method) and hasattr(method, mark)
    ]
    return sorted(found, key=lambda item: item[0])
