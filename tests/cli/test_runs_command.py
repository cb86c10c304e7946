"""`tpu-pipeline runs` and `runs diff` on a run folder of three real runs, without TensorFlow.

The folder is the session's `three_digits_runs` (tests/conftest.py): its digits run
(copied, so it stays as it was), then a run trained far shorter (refused) and one trained
as the first (blessed, pushed as a new version), each reported as `tpu-pipeline run`
reports it. The commands run in a child process, as a user runs them, which says whether
TensorFlow was loaded.
How fast they answer is measured by the benchmark (`make bench BENCH_ARGS="--only runs"`).
"""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys

import pytest

from tests.conftest import SHORT_DIGITS_TRAIN_STEPS as SHORT
from tpu_pipeline.common.config import REPO_ROOT
from tpu_pipeline.components.serving.eval_outcomes import EVAL_OUTCOMES_FILE
from tpu_pipeline.pipeline.runs.history import read_history

pytestmark = pytest.mark.slow

# Runs `tpu-pipeline ARGS` as the console command does (cli/entry.py; `{module}` cli.main for
# `python -m tpu_pipeline.cli.main`), then says on stderr whether TensorFlow was imported.
_CHILD = (
    "import sys\n"
    "from {module} import main\n"
    "code = main(sys.argv[1:])\n"
    "loaded = any(m == 'tensorflow' or m.startswith('tensorflow.') for m in sys.modules)\n"
    "print('TENSORFLOW ' + ('LOADED' if loaded else 'NOT LOADED'), file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def tpu_pipeline(
    *args: str, module: str = "tpu_pipeline.cli.entry"
) -> tuple[int, list[str], list[str]]:
    """(exit code, stdout lines, stderr lines) of `tpu-pipeline ARGS` in a child process."""
    done = subprocess.run(
        [sys.executable, "-c", _CHILD.format(module=module), *args],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=120,
    )
    err = done.stderr.splitlines()
    assert err[-1] == "TENSORFLOW NOT LOADED", done.stderr
    return done.returncode, done.stdout.splitlines(), err[:-1]


def blocks(lines: list[str]) -> dict[int, list[str]]:
    """`runs` output by run number: each run's heading and its indented lines."""
    found: dict[int, list[str]] = {}
    for line in lines[1:]:
        heading = re.match(r"^#(\d+)  ", line)
        if heading:
            number = int(heading[1])
            found[number] = []
        found[number].append(line)
    return found


def test_runs_lists_every_run_newest_first_with_what_changed_and_what_served(three_digits_runs):
    run_dir, _, (first, short, again) = three_digits_runs
    code, out, err = tpu_pipeline("runs", str(run_dir))
    assert code == 0 and err == []
    assert out[0] == f"tpu-pipeline-digits in {run_dir}: 3 run(s), newest first"
    runs = blocks(out)
    assert sorted(runs) == [1, 2, 3]
    newest, middle, oldest = runs[1], runs[2], runs[3]
    assert "  blessed and pushed  (" in newest[0] and "  not blessed  (" in middle[0]
    assert "  blessed and pushed  (" in oldest[0]
    assert oldest[2] == "    config: first run of this folder"
    assert f"trainer.train_steps: 300 -> {SHORT}" in middle[2]
    assert "serving.tflite_variants" in middle[2]  # the later runs measure no TFLite variant
    assert newest[2] == f"    config: since #2: trainer.train_steps: {SHORT} -> 300"
    assert all(block[1].startswith("    data: span 0, data ") for block in runs.values())
    assert newest[1].endswith(", same as #2)") and middle[1].endswith(", same as #3)")
    baseline = f"(baseline {first.metrics['accuracy']:.4f})"
    assert middle[4] == f"    accuracy: {short.metrics['accuracy']:.4f} {baseline}"
    assert newest[4] == f"    accuracy: {again.metrics['accuracy']:.4f} {baseline}"
    assert oldest[4] == f"    accuracy: {first.metrics['accuracy']:.4f} (no baseline)"
    assert middle[5] == f"    blessed: no ({short.blessing_reason})"
    # Each pushed version, and when it served: the first until the third run's push.
    old_version = pathlib.Path(first.pushed_model).name
    new_version = pathlib.Path(again.pushed_model).name
    assert re.fullmatch(
        rf"    pushed: {old_version}, served from [\d-]+ [\d:]+ until [\d-]+ [\d:]+ "
        r"\(a newer push\); new version",
        oldest[6],
    ), oldest[6]
    assert re.fullmatch(
        rf"    pushed: {new_version}, served from [\d-]+ [\d:]+ until now; new version", newest[6]
    ), newest[6]
    assert len(middle) == 6  # nothing pushed
    assert newest[3].startswith("    model: ") and "(executed)" in newest[3]


def _outcomes(run_dir: pathlib.Path, number: int) -> dict[str, tuple[int, int]]:
    """Read straight from the file the run's Evaluator wrote: key -> (label, answer)."""
    run = read_history(run_dir).runs[number - 1]
    written = json.loads((pathlib.Path(run.evaluation_uri) / EVAL_OUTCOMES_FILE).read_text())
    answers = zip(written["labels"], written["predicted"], strict=True)
    return dict(zip(written["keys"], answers, strict=True))


def _flipped(run_dir: pathlib.Path, older: int, newer: int) -> tuple[int, int]:
    before, after = _outcomes(run_dir, older), _outcomes(run_dir, newer)
    worse = sum(1 for k, (y, p) in after.items() if before[k][1] == y and p != y)
    better = sum(1 for k, (y, p) in after.items() if before[k][1] != y and p == y)
    return worse, better


def test_runs_diff_compares_the_two_newest_down_to_the_examples_that_flipped(three_digits_runs):
    run_dir, _, (_, short, again) = three_digits_runs
    code, out, err = tpu_pipeline("runs", str(run_dir), "diff")
    assert code == 0 and err == []
    assert out[0].startswith("from #2 (") and " to #1 (" in out[0]
    assert out[1:3] == ["configuration:", f"  trainer.train_steps: {SHORT} -> 300"]
    assert "data: no difference" in out
    accuracy = f"  accuracy: {short.metrics['accuracy']:.4f} -> {again.metrics['accuracy']:.4f} ("
    assert any(line.startswith(accuracy) for line in out)
    assert "  outcome: not blessed -> blessed and pushed" in out
    assert "per class:" in out and "per slice:" in out
    worse, better = _flipped(run_dir, 2, 1)
    assert better > 0
    assert f"{worse} right -> wrong, {better} wrong -> right" in next(
        line for line in out if line.startswith("examples: ")
    )
    assert "  wrong -> right:" in out


def test_runs_diff_takes_the_runs_by_number(three_digits_runs):
    run_dir, *_ = three_digits_runs
    code, out, _ = tpu_pipeline("runs", str(run_dir), "diff", "3", "2")
    assert code == 0 and out[0].startswith("from #3 (")
    worse, better = _flipped(run_dir, 3, 2)
    assert worse > 0
    line = next(line for line in out if line.startswith("examples: "))
    assert f"{worse} right -> wrong, {better} wrong -> right" in line
    assert f"  trainer.train_steps: 300 -> {SHORT}" in out


def test_the_run_folder_comes_from_the_flags_as_for_report(three_digits_runs):
    run_dir, root, _ = three_digits_runs
    by_folder = tpu_pipeline("runs", str(run_dir))
    by_flags = tpu_pipeline("runs", "--dataset", "digits", "--output-dir", str(root))
    assert by_flags == by_folder
    # `python -m tpu_pipeline.cli.main runs`, every command's module loaded first, answers the same.
    assert tpu_pipeline("runs", str(run_dir), module="tpu_pipeline.cli.main") == by_folder
    assert tpu_pipeline(
        "runs", str(run_dir), "diff", module="tpu_pipeline.cli.main"
    ) == tpu_pipeline("runs", str(run_dir), "diff")


def test_a_missing_run_folder_or_run_is_exit_2_in_one_line(three_digits_runs, tmp_path):
    run_dir, *_ = three_digits_runs
    code, out, err = tpu_pipeline("runs", str(tmp_path / "none"))
    assert (code, out) == (2, [])
    assert err == [  # as every command that takes a run says it (cli/run_folder.py)
        f"tpu-pipeline: no run folder {tmp_path / 'none'} (RUN); pass a run folder such as "
        "output/tpu-pipeline-digits, or the --config/--dataset/--output-dir of its run"
    ]
    code, _, err = tpu_pipeline("runs", str(run_dir), "diff", "7", "1")
    assert code == 2 and len(err) == 1
    assert err[0].startswith(f"tpu-pipeline: runs diff: no run in {run_dir} match '7'")


def test_the_report_links_to_the_previous_runs_report_and_charts_the_last_runs(three_digits_runs):
    run_dir, _, _ = three_digits_runs
    history = read_history(run_dir)
    report = run_dir / "report"
    page = (report / "report.html").read_text()
    link = re.search(r'<a id="previous-report" href="([^"]+)">', page)
    assert link, "no link to the previous run's report"
    previous = history.runs[1]
    assert (report / link[1]).resolve() == (
        report / "runs" / (re.sub(r"[^A-Za-z0-9._-]", "-", previous.run_id) + ".html")
    ).resolve()
    kept = (report / link[1]).read_text()
    assert f"Run {previous.run_id} in" in kept  # the previous run's own page
    assert (report / "history.png").stat().st_size > 0
    assert 'alt="history"' in page
    # The first run wrote no report (it ran before reports were kept): said, not linked.
    assert "its report was not kept" in kept
