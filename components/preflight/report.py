"""What a preflight reports: one named result per check, and the one way errors are worded."""

from __future__ import annotations

import dataclasses
from typing import Literal

Status = Literal["pass", "warn", "fail", "skip"]
# At most this many offenders are named per check.
MAX_NAMED = 5


class PreflightError(RuntimeError):
    """The configured model or input would not run on a TPU; the message holds the report."""


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """One named check: its status and what it found (the offending layer or op)."""

    name: str
    status: Status
    detail: str


@dataclasses.dataclass(frozen=True)
class PreflightReport:
    """Every check of one preflight, in the order they ran."""

    title: str
    checks: list[CheckResult]

    @property
    def passed(self) -> bool:
        return all(check.status != "fail" for check in self.checks)

    def check(self, name: str) -> CheckResult:
        """The result of the check called `name`."""
        return next(check for check in self.checks if check.name == name)

    def to_text(self) -> str:
        width = max(len(check.name) for check in self.checks)
        lines = [self.title]
        lines += [f"  {c.status.upper():<4}  {c.name:<{width}}  {c.detail}" for c in self.checks]
        lines.append("preflight passed" if self.passed else "preflight FAILED")
        return "\n".join(lines)


def error_line(error: BaseException) -> str:
    """An exception as one line: its type and the first line of its message.

    TensorFlow and XLA errors run to hundreds of lines; the first names the problem.
    """
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")


def failed(name: str, error: BaseException) -> CheckResult:
    """The check `name` failed with `error`."""
    return CheckResult(name, "fail", error_line(error))


def named(findings: list[str]) -> str:
    """The first few findings, and how many more there are."""
    shown = "; ".join(findings[:MAX_NAMED])
    more = len(findings) - MAX_NAMED
    return f"{shown}; and {more} more" if more > 0 else shown


def skipped(names: tuple[str, ...], reason: str) -> list[CheckResult]:
    """The checks `names`, not run because of `reason`."""
    return [CheckResult(name, "skip", f"not run: {reason}") for name in names]
