"""The `tpu-pipeline` console command: `runs` answered first, every other command by cli/main.py.

`runs` reads a run folder's ML Metadata store and nothing else; importing cli/main.py
loads every command's module, the typed configuration (pydantic) and numpy, about 0.4 s
of CPU, twice what `runs` needs in all. So it is dispatched before that import, and
answers in well under a second (docs/benchmarks.md, section `runs`).
`python -m tpu_pipeline.cli.main runs` gives the same answer, after the longer import.
"""

from __future__ import annotations

import sys
from typing import NoReturn

from tpu_pipeline.cli.process_exit import exit_after_cleanup


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `tpu-pipeline` console command."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["runs"]:
        from tpu_pipeline.cli.runs_commands import runs_main

        return runs_main(args[1:])
    from tpu_pipeline.cli.main import main as main_with_every_command

    return main_with_every_command(argv)


def console_main() -> NoReturn:
    """The console script: the command, then the end of the process (cli/process_exit.py)."""
    exit_after_cleanup(main())


if __name__ == "__main__":
    console_main()
