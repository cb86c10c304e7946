"""Runs a command and writes its peak resident memory (GB) to a file.

    python -m benchmarks.rss OUTPUT_FILE COMMAND [ARG ...]

The benchmark launches measured commands through this small process because
Linux carries a process's memory high-water mark across `exec`: a command
forked straight from the benchmark (gigabytes of TensorFlow and models) would
report the benchmark's own peak instead of its own. The peak covers the
command and every child it waited for (Beam workers, for example).
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys


def main(output: pathlib.Path, command: list[str]) -> int:
    process = subprocess.Popen(command)
    _, status, usage = os.wait4(process.pid, 0)
    output.write_text(str(usage.ru_maxrss / 1e6))  # ru_maxrss is in KiB on Linux
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1]), sys.argv[2:]))
