"""The command's process ends as Python would end it, short of finalizing the interpreter."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import atexit, concurrent.futures, pathlib, sys, threading, time
    from tpu_pipeline.cli.process_exit import exit_after_cleanup

    folder = pathlib.Path(sys.argv[1])

    def slow_write(name):
        time.sleep(0.3)
        (folder / name).write_text("done")

    threading.Thread(target=slow_write, args=("thread",)).start()
    concurrent.futures.ThreadPoolExecutor(1).submit(slow_write, "pool")
    atexit.register(lambda: (folder / "atexit").write_text("done"))
    print("buffered, not flushed", end="")
    exit_after_cleanup(3)
    """
)


def test_threads_finish_atexit_handlers_run_and_output_is_flushed(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=120
    )

    assert done.returncode == 3, done.stderr
    assert done.stdout == "buffered, not flushed"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["atexit", "pool", "thread"]
