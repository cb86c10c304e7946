"""One run, or one serving action, at a time per run folder.

Two runs in the same folder would train twice and race on one metadata store
and one serving folder; a rollback during a run would change the baseline the
run already resolved. The lock is an OS file lock (`common/file_lock.py`): the
kernel drops it when its holder exits, however it exits (kill -9 too), so a
lock left by a dead run never blocks the next one. The lock file says who holds it.
"""

from __future__ import annotations

import contextlib
import pathlib
from collections.abc import Callable, Iterator

from tpu_pipeline.common.config import PipelineConfig
from tpu_pipeline.common.file_lock import LockBusyError, held_lock
from tpu_pipeline.common.owned_paths import claim_folder

LOCK_FILE = ".run.lock"
# How long a serving action waits for a run or another action to release the folder.
DEFAULT_WAIT_SECONDS = 120.0


class RunInProgressError(RuntimeError):
    """Another process is running the pipeline, or a serving action, in this run folder."""


def claim_run_folder(config: PipelineConfig) -> None:
    """Makes the run folder one, refusing a folder of the user's (`common/owned_paths.py`).

    The run folder is `--output-dir`/<pipeline>-<dataset>: new, empty, marked by an
    earlier run, or one a run wrote before markers existed (it holds a metadata store,
    a pipeline root or the run lock).

    Raises:
      UserPathError: the folder holds files no run wrote.
    """
    earlier = {config.metadata_path.name, config.pipeline_root.name, LOCK_FILE}
    claim_folder(config.run_dir, "--output-dir", adopt=lambda names: bool(earlier & set(names)))


@contextlib.contextmanager
def exclusive_run(
    run_dir: pathlib.Path,
    what: str = "run",
    wait_seconds: float | None = 0,
    on_wait: Callable[[str], None] | None = None,
) -> Iterator[None]:
    """Holds `run_dir`'s lock for the block, as `what`; by default refuses at once if it is taken.

    Args:
      run_dir: the run folder (created if missing).
      what: what holds it, for the message of whoever finds it taken ("run", "serving rollback").
      wait_seconds: how long to wait for the holder (None: for ever).
      on_wait: told who holds the lock when the first try finds it taken.

    Raises:
      RunInProgressError: naming the holder, its process id and start time.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(held_lock(run_dir / LOCK_FILE, what, wait_seconds, on_wait))
        except LockBusyError as error:
            waited = f", still after {wait_seconds:g} s" if wait_seconds else ""
            raise RunInProgressError(
                f"{run_dir} is in use by another {error.holder}{waited}: "
                "let it finish or stop it, or use another --output-dir"
            ) from None
        yield
