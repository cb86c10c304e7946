"""Trust on first use for what an image build pulls by digest: one lock file, as `go.sum`.

Some pins cannot be known where the code is written (a base image's digest, a file
no one publishes a hash for). The first build that can reach the registries
resolves each and records it in the lock file, which the user commits; every later
build resolves again and must find the same digest, or stops naming the source and
both digests. A build that cannot reach a registry uses the recorded digest (docker
pulls by digest and `sha256sum -c` checks the file, so the bytes are still checked).

Resolution is a function per pin (`Pin.resolve`): the network ones live in
`kubeflow/tpu_image.py`, tests give their own.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
from collections.abc import Callable

from tpu_pipeline.common.atomic_file import write_text

_HEADER = (
    "# Written by `python -m tpu_pipeline.kubeflow.tpu_image` on the first build that reached each source:\n"
    "# <source> sha256:<digest>. Commit it; every later build checks the sources still match.\n"
)
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class UnresolvableError(RuntimeError):
    """A source cannot be reached from here (no network, no docker, no such tag)."""


class LockError(RuntimeError):
    """A source now resolves to another digest than the lock recorded, or cannot be resolved
    and was never recorded: the build stops, said in one line."""


@dataclasses.dataclass(frozen=True)
class Pin:
    """One value the build takes by digest: its build argument, what it is read from, how."""

    build_arg: str
    source: str
    resolve: Callable[[str], str]  # source -> sha256 hex; raises UnresolvableError


@dataclasses.dataclass(frozen=True)
class Resolved:
    """The digests to build with (by build argument), and a line per source not checked now."""

    digests: dict[str, str]
    unverified: list[str]


def read_lock(path: pathlib.Path) -> dict[str, str]:
    """The lock's digests by source ({} without a lock file).

    Raises:
      LockError: a line is not `<source> sha256:<64 hex>`.
    """
    if not path.exists():
        return {}
    entries = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        source, _, digest = line.rpartition(" sha256:")
        if not source or not _SHA256.match(digest):
            raise LockError(f"{path}:{number}: expected `<source> sha256:<digest>`, got {line!r}")
        entries[source] = digest
    return entries


def _lock_text(entries: dict[str, str]) -> str:
    return _HEADER + "".join(f"{source} sha256:{entries[source]}\n" for source in sorted(entries))


def resolve_pins(pins: list[Pin], lock_path: pathlib.Path) -> Resolved:
    """Resolves every pin, checks it against the lock, and records the ones new to it.

    Raises:
      LockError: a source resolves to another digest than recorded, or cannot be
        resolved and is not recorded; the lock is left as it was.
    """
    recorded = read_lock(lock_path)
    entries = dict(recorded)
    digests, unverified = {}, []
    for pin in pins:
        try:
            found = pin.resolve(pin.source)
        except UnresolvableError as error:
            if pin.source not in recorded:
                raise LockError(
                    f"{pin.source}: cannot be resolved here ({error}) and {lock_path} has no "
                    "digest for it; build once where the registry is reachable, then commit "
                    f"{lock_path.name}"
                ) from None
            unverified.append(
                f"{pin.source}: not checked against its source ({error}); "
                f"building with the digest {lock_path.name} recorded"
            )
            found = recorded[pin.source]
        if pin.source in recorded and recorded[pin.source] != found:
            raise LockError(
                f"{pin.source}: now sha256:{found}, but {lock_path} recorded "
                f"sha256:{recorded[pin.source]} on first use; find out why it changed before "
                "trusting it (to accept it, delete its line and build again)"
            )
        entries[pin.source] = digests[pin.build_arg] = found
    if entries != recorded:
        write_text(lock_path, _lock_text(entries))
    return Resolved(digests, unverified)
