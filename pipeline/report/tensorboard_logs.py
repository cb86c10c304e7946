"""Reads the Trainer's TensorBoard logs back: per-epoch scalars and what kinds were written.

Keras's TensorBoard callback writes `train/` and `validation/` event files with
`epoch_<metric>` scalars; the Trainer adds a `run/` folder with sample images
and text. The report draws its training curves from these same files, so what
it shows is what TensorBoard shows.
"""

from __future__ import annotations

import os
import pathlib
import shlex

from tensorboard.backend.event_processing import event_accumulator
from tensorboard.util import tensor_util

EPOCH_PREFIX = "epoch_"
PROFILE_DIR = pathlib.Path("plugins") / "profile"


def _load(event_dir: str | os.PathLike) -> event_accumulator.EventAccumulator:
    # Size guidance 0 keeps every event; the default samples long runs down.
    guidance = {kind: 0 for kind in (event_accumulator.TENSORS, event_accumulator.IMAGES)}
    accumulator = event_accumulator.EventAccumulator(str(event_dir), size_guidance=guidance)
    accumulator.Reload()
    return accumulator


def _event_dirs(log_dir: pathlib.Path) -> list[pathlib.Path]:
    return sorted({path.parent for path in pathlib.Path(log_dir).rglob("events.out.tfevents.*")})


def epoch_scalars(log_dir: str | os.PathLike) -> dict[str, dict[str, list[float]]]:
    """`{"train": {"loss": [per epoch...]}, "validation": {...}}` from the epoch summaries.

    `log_dir` may be a Cloud Storage URI (a Vertex AI run's `model_run`): TensorBoard reads
    it through TensorFlow's file system, as it reads a local folder. A resumed training
    rewrites the epochs it repeats; the newest value wins.
    """
    from tensorboard.compat import tf

    scalars: dict[str, dict[str, list[float]]] = {}
    for split in ("train", "validation"):
        event_dir = os.path.join(os.fspath(log_dir), split)  # pathlib mangles gs://
        if not tf.io.gfile.isdir(event_dir):
            continue
        accumulator = _load(event_dir)
        for tag in accumulator.Tags()["tensors"]:
            if not tag.startswith(EPOCH_PREFIX):
                continue
            by_step = {
                event.step: float(tensor_util.make_ndarray(event.tensor_proto).item())
                for event in sorted(accumulator.Tensors(tag), key=lambda e: e.wall_time)
            }
            name = tag.removeprefix(EPOCH_PREFIX)
            scalars.setdefault(split, {})[name] = [by_step[step] for step in sorted(by_step)]
    return scalars


def summary_kinds(log_dir: pathlib.Path) -> dict[str, list[str]]:
    """Tags written per kind (scalars, histograms, images, text, ...), plus profiler runs.

    The kind is the TensorBoard plugin that shows the summary; `profile` lists
    the profiler trace folders, written only when `trainer.profile_batches` is set.
    """
    kinds: dict[str, set[str]] = {}
    for event_dir in _event_dirs(log_dir):
        accumulator = _load(event_dir)
        for tag in accumulator.Tags()["tensors"]:
            plugin = accumulator.SummaryMetadata(tag).plugin_data.plugin_name
            kinds.setdefault(plugin, set()).add(tag)
    profiles = sorted(pathlib.Path(log_dir).rglob(str(PROFILE_DIR / "*")))
    if profiles:
        kinds["profile"] = {str(path.relative_to(log_dir)) for path in profiles}
    return {kind: sorted(tags) for kind, tags in sorted(kinds.items())}


def tensorboard_command(
    log_dir: pathlib.Path, port: int | None = None, trials_dir: pathlib.Path | None = None
) -> list[str]:
    """The `tensorboard` command line that shows `log_dir`, and a Tuner's trials if given.

    With trials, runs are named `trainer/...` and `tuner/trial_<id>/...`: one per trial.
    """
    if trials_dir is None:
        command = ["tensorboard", "--logdir", str(log_dir)]
    else:
        command = ["tensorboard", "--logdir_spec", f"trainer:{log_dir},tuner:{trials_dir}"]
    if port is not None:
        command += ["--port", str(port)]
    return command


def shell_line(command: list[str]) -> str:
    """A command line a user can paste into a shell."""
    return shlex.join(command)
