"""The run folder a command acts on, named the same way by every command that takes a run.

`report`, `tensorboard`, `runs` and `serving` take a positional RUN
(`output/tpu-pipeline-digits`, the folder `run` wrote), or find it from the
--config/--dataset/--output-dir flags `run` takes. A run folder that does not exist
is a usage error (exit 2) said in one line, before anything is read or created:
otherwise a typo, or a command started from another folder, would answer about a
folder that is not there ("no versions") and exit 0.

Importing this module loads neither pydantic nor TensorFlow: `runs RUN` answers in
well under a second (cli/entry.py); the configuration is loaded only when asked for.
"""

from __future__ import annotations

import argparse
import pathlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tpu_pipeline.common.config import PipelineConfig

RUN_HELP = "run folder, e.g. output/tpu-pipeline-digits (default: from the configuration)"
METADATA_FILE = "metadata.sqlite"


class RunFolderError(ValueError):
    """The run named is not there, or RUN and the configuration name two runs: exit 2."""


def add_run_argument(parser: argparse.ArgumentParser) -> None:
    """The optional positional RUN (flags naming the run are added by each command)."""
    parser.add_argument("run", nargs="?", type=pathlib.Path, metavar="RUN", help=RUN_HELP)


def add_run_flags(parser: argparse.ArgumentParser, with_config: bool = True) -> None:
    """--dataset and --output-dir (and --config unless the command adds its own) naming a run."""
    if with_config:
        parser.add_argument(
            "--config", metavar="FILE", help="YAML configuration file naming the run"
        )
    parser.add_argument("--dataset", help="built-in dataset whose run folder to use")
    parser.add_argument(
        "--output-dir",
        metavar="DIR",
        help="folder holding the run folders, as run's --output-dir (default: output)",
    )


def existing_run(run_dir: pathlib.Path, named_by: str) -> pathlib.Path:
    """`run_dir`, if it is a folder.

    Raises:
      RunFolderError: it is not; the line says how it was named and how to name one.
    """
    if not pathlib.Path(run_dir).is_dir():
        raise RunFolderError(
            f"no run folder {run_dir} ({named_by}); pass a run folder such as "
            "output/tpu-pipeline-digits, or the --config/--dataset/--output-dir of its run"
        )
    return pathlib.Path(run_dir)


def _overrides(args: argparse.Namespace, flags: dict[str, Any] | None) -> dict[str, Any]:
    named = {key: getattr(args, key, None) for key in ("dataset", "output_dir")}
    return {**named, **(flags or {}), **dict(getattr(args, "assignments", None) or [])}


def run_dir_from_args(args: argparse.Namespace) -> pathlib.Path:
    """The run folder RUN or the flags name, which must exist.

    Raises:
      RunFolderError: no such folder.
      ConfigError: the configuration the flags name is wrong.
    """
    if args.run is not None:
        return existing_run(args.run, "RUN")
    return config_for_run(args).run_dir


def config_for_run(
    args: argparse.Namespace, flags: dict[str, Any] | None = None, run: pathlib.Path | None = None
) -> PipelineConfig:
    """The configuration of the run RUN (or `run`) names, else the one the flags name.

    A RUN takes its dataset and pipeline name from the configuration its newest run
    noted in ML Metadata (a folder without runs: from its name, `<pipeline>-<dataset>`),
    under the --config file and the flags; they must name that same folder.

    Raises:
      RunFolderError: the folder does not exist, or the configuration names another.
      ConfigError: the configuration is wrong.
    """
    from tpu_pipeline.common.config import load_config

    overrides = _overrides(args, flags)
    folder = run if run is not None else getattr(args, "run", None)
    if folder is None:
        config = load_config(args.config, overrides)
        existing_run(config.run_dir, "from the configuration")
        return config
    folder = existing_run(folder, "RUN").resolve()
    overrides["output_dir"] = str(folder.parent)
    config = load_config(args.config, overrides, _noted_or_named(folder))
    if config.run_dir != folder:
        raise RunFolderError(
            f"RUN {folder} is not the run folder the configuration names ({config.run_dir}); "
            "give RUN or the flags naming its run, not both"
        )
    return config


def _noted_or_named(folder: pathlib.Path) -> dict[str, Any]:
    """The pipeline name and dataset of the run in `folder`: as its newest run noted them,
    else read from the folder's name when it ends in a built-in dataset's."""
    if (folder / METADATA_FILE).exists():
        from tpu_pipeline.pipeline.runs.history import read_history

        noted = next((run.config for run in read_history(folder).runs if run.config), None)
        if noted and "pipeline_name" in noted:
            return {"pipeline_name": noted["pipeline_name"], "dataset": noted["dataset"]}
    from tpu_pipeline.common.config import BUILTIN_DATASETS

    for name in BUILTIN_DATASETS:
        if folder.name.endswith(f"-{name}"):
            return {"pipeline_name": folder.name.removesuffix(f"-{name}"), "dataset": name}
    return {}
