"""The `runs` bench section: how fast `tpu-pipeline runs` and `runs diff` answer.

On a run folder of three real digits runs (the first trained as `make run` trains, the
second far shorter, the third as the first), each command runs as a user runs it, in
its own process: its wall time, its CPU time, and whether TensorFlow was imported
(the child says, as tests/cli/test_runs_command.py's does). Also what logging a run to
a local MLflow server costs (`track_run`, the run's report and pushed model included).
"""

from __future__ import annotations

import pathlib
import resource
import statistics
import subprocess
import sys
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
TPU_PIPELINE = (sys.executable, "-m", "tpu_pipeline.cli.main")
# Three runs of one folder: what `--set` each adds to the digits defaults.
RUNS = (
    (),
    ("trainer.train_steps=40",),
    ("evaluator.max_accuracy_drop=0.05", "trainer.seed=1"),
)
_CHILD = (
    "import sys\n"
    "from tpu_pipeline.cli.entry import main\n"  # what the console command runs
    "code = main(sys.argv[1:])\n"
    "loaded = any(m == 'tensorflow' or m.startswith('tensorflow.') for m in sys.modules)\n"
    "print('TENSORFLOW ' + ('LOADED' if loaded else 'NOT LOADED'), file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def three_runs(workdir: pathlib.Path, training: list[str] | None = None) -> pathlib.Path:
    """A run folder with three runs (made once per workdir); its path.

    `training`: `tpu-pipeline run` flags that set each run's training instead of 300 steps
    (the benchmark's smoke size cuts it to a few); they come last, so they win.
    """
    output = workdir / "runs-history"
    run_dir = output / "tpu-pipeline-digits"
    if (run_dir / "metadata.sqlite").exists():
        return run_dir
    for settings in RUNS:
        flags = [flag for setting in settings for flag in ("--set", setting)]
        subprocess.run(
            [
                *TPU_PIPELINE,
                "run",
                "--output-dir",
                str(output),
                "--train-steps",
                "300",
                *flags,
                *(training or []),
            ],
            check=True,
            cwd=REPO_ROOT,
            capture_output=True,
        )
    return run_dir


def command_seconds(args: list[str], repeats: int) -> dict:
    """Median wall and CPU seconds of `tpu-pipeline ARGS`, and whether TensorFlow loaded."""
    walls, cpus, loaded = [], [], False
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, *args],
            capture_output=True,
            text=True,
            cwd=REPO_ROOT,
            check=True,
        )
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        loaded = loaded or done.stderr.splitlines()[-1] == "TENSORFLOW LOADED"
    return {
        "wall_s": statistics.median(walls),
        "cpu_s": statistics.median(cpus),
        "tensorflow": loaded,
        "lines": len(done.stdout.splitlines()),
    }


def tracking_seconds(run_dir: pathlib.Path, workdir: pathlib.Path) -> dict:
    """Seconds `track_run` takes to log the folder's newest run to a local MLflow server."""
    from tests.pipeline.tracking.mlflow_server import mlflow_server
    from tpu_pipeline.common.config import load_config
    from tpu_pipeline.pipeline.report.collect import summarize_stored_run
    from tpu_pipeline.pipeline.report.run_store import open_latest_run
    from tpu_pipeline.pipeline.tracking import track_run

    config = load_config(None, {"output_dir": str(run_dir.parent)})
    summary = summarize_stored_run(open_latest_run(run_dir), list(config.dataset.class_names))
    with mlflow_server(workdir / "mlflow") as url:
        tracking = config.tracking.model_copy(update={"mlflow_tracking_uri": url})
        started = time.perf_counter()
        result = track_run(config.model_copy(update={"tracking": tracking}), summary)
        seconds = time.perf_counter() - started
    if result.warning:
        raise RuntimeError(result.warning)
    return {"seconds": seconds, "registered": len(result.lines) > 1}
