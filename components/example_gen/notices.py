"""ExampleGen's one-line notices about data that is read but odd (a split carved out of test
files, images unlike the rest).

Logged as warnings with one prefix, so they stay in the run's log and the local
runner's progress (`pipeline/local/runner.py`) shows them between the component lines.
"""

from __future__ import annotations

from absl import logging

NOTICE_PREFIX = "data: "
# A notice names this many files, then how many more there are.
NAMED_FILES = 3


def notify(text: str) -> None:
    """Logs one notice line (`data: ...`)."""
    logging.warning("%s%s", NOTICE_PREFIX, text)


def name_files(paths: list[str]) -> str:
    """The first `NAMED_FILES` paths, then `and N more`: `a.gif, b.gif and 4 more`."""
    named = ", ".join(paths[:NAMED_FILES])
    rest = len(paths) - NAMED_FILES
    return f"{named} and {rest} more" if rest > 0 else named
