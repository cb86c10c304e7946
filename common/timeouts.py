"""Bounding calls that have no timeout of their own.

Several libraries we call block on the network with no deadline: the GCE
metadata lookup in TPUClusterResolver, DNS and metadata probes in
`google.auth.default`. A call blocked there cannot be interrupted from Python,
so it runs in a daemon thread that is abandoned, and dies with the process,
when the deadline passes. A gRPC server that accepts TCP connections but never
speaks HTTP/2 (a wrong port, a stuck worker) blocks TensorFlow's own connect the
same way: `wait_for_grpc_endpoint` asks it first, under a deadline.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import grpc

_T = TypeVar("_T")


def call_with_timeout(
    fn: Callable[[], _T],
    timeout_s: float,
    what: str,
    on_timeout: type[Exception] = TimeoutError,
) -> _T:
    """Returns `fn()`, or raises `on_timeout` if it has not returned after `timeout_s`.

    An exception raised by `fn` is re-raised unchanged in the caller's thread.
    """
    outcome: dict[str, object] = {}

    def target() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as error:  # re-raised below, in the caller's thread
            outcome["error"] = error

    thread = threading.Thread(target=target, name=what, daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise on_timeout(f"{what}: no answer within {timeout_s:g} s")
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]


def wait_for_grpc_endpoint(address: str, timeout_s: float) -> None:
    """Waits until a gRPC server answers at `address` (host:port).

    Raises:
      TimeoutError: no answer after `timeout_s`, where TensorFlow's own connect would block.
    """
    channel = grpc.insecure_channel(address)
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout_s)
    except grpc.FutureTimeoutError:
        raise TimeoutError(f"grpc://{address}: no gRPC answer within {timeout_s:g} s") from None
    finally:
        channel.close()
