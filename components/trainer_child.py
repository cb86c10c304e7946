"""The Trainer's training child: `python -m tpu_pipeline.components.trainer_child WORK_DIR`.

Started by `components/training/separate_process.py`, which explains why. It calls
`run_fn` with the Trainer's arguments, which trains and exports here as it does
in-process, and exits: its memory, TensorFlow's pool included, goes back to the
machine. Its log records go to the parent over stdout, one line each; on failure, the
error goes to WORK_DIR, so the parent raises it by name.
"""

from __future__ import annotations

import json
import logging
import pathlib
import sys
import traceback

from absl import logging as absl_logging

from tpu_pipeline.components.trainer import run_fn
from tpu_pipeline.components.training.separate_process import (
    ERROR_FILE,
    LOG_LINE_PREFIX,
    TrainingRequest,
)


class _ToParent(logging.Handler):
    """Writes each record to stdout as one line the parent logs again."""

    def emit(self, record: logging.LogRecord) -> None:
        line = json.dumps([record.levelno, record.getMessage()])
        sys.stdout.write(f"{LOG_LINE_PREFIX}{line}\n")
        sys.stdout.flush()


def _log_to_parent() -> None:
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.addHandler(_ToParent())
    root.setLevel(logging.INFO)
    absl_logging.set_verbosity(absl_logging.INFO)


def main(work_dir: pathlib.Path) -> int:
    _log_to_parent()
    try:
        run_fn(TrainingRequest.read(work_dir).fn_args(), process="child")
        return 0
    except BaseException as error:  # Ctrl-C too: the parent says how the training ended
        message = str(error).strip() or "no message"
        (work_dir / ERROR_FILE).write_text(
            json.dumps({"error": f"{type(error).__name__}: {message}"})
        )
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1])))
