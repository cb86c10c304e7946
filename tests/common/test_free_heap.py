"""Freed C-heap memory goes back to the OS when asked, in a fresh process.

The case runs in a child Python process: the test session's heap (after TensorFlow
and pipeline runs) would blur a few hundred megabytes either way.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

MB = 1024 * 1024

# 300 MB in 100 KB blocks (below glibc's mmap threshold, so on the heap), one block kept
# after them: the heap's top cannot shrink, so freeing the rest leaves them resident.
FRAGMENTED_HEAP = """
import json, psutil
from tpu_pipeline.common.free_heap import return_free_heap

def resident():
    return psutil.Process().memory_info().rss

blocks = [bytearray(100_000) for _ in range(3000)]
kept = bytearray(100_000)
allocated = resident()
blocks = None
freed = resident()
asked = return_free_heap()
print(json.dumps({"allocated": allocated, "freed": freed, "asked": asked, "after": resident()}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim is Linux's")
def test_freed_heap_blocks_stay_resident_until_returned():
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(FRAGMENTED_HEAP)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    figures = json.loads(done.stdout)
    assert figures["asked"] is True
    # Without the call the freed blocks stay resident (what a conversion left behind)...
    assert figures["freed"] > figures["allocated"] - 50 * MB
    # ...and with it at least 200 of the 300 MB leave the process.
    assert figures["after"] < figures["freed"] - 200 * MB
