"""Hands the C heap's free pages back to the operating system.

glibc keeps memory a library freed for its next allocation, so a process's
resident size after a large transient (a TFLite conversion copies a model's
weights a dozen times) stays near the transient's peak, and every later step
starts from there. `malloc_trim(0)` releases the free pages of every arena.
TensorFlow's own allocator (oneDNN's BFC pool on CPU) is not the C heap and is
not affected. Elsewhere than glibc there is nothing to call, and nothing is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):  # not glibc (musl, macOS): no malloc_trim
        return None


def return_free_heap() -> bool:
    """Returns the C heap's free pages to the OS; True when there was a way to ask."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
