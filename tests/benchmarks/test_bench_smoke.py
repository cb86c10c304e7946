"""Every `make bench` section runs end to end at smoke size and returns the rows the docs show.

A change to the product's output (a progress line, the summary JSON) or to a section's
own code then breaks a test, not the next person's three-minute benchmark run. The
figures at smoke size mean nothing; what is checked is that each section finishes, its
rows carry numbers where they must, and each row is one of the figures docs/benchmarks.md
lists under "Sections and their figures" with the same target.
"""

from __future__ import annotations

import math
import pathlib
import re

import pytest

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "benchmarks.md"
FIGURES_HEADING = "## Sections and their figures"
# Every section, in bench.SECTIONS' order. Those that run a whole pipeline (ours or the
# TFX peer's) or a training, and the two that start a process per measurement to run
# pipeline components (scale's statistics and Transform analysis, photo_ingest's
# ExampleGen), 20-130 CPU seconds each and 11 CPU minutes together, are slow: in
# `make test` and CI, not in `make test-fast`.
SLOW = pytest.mark.slow
SECTIONS = [
    "trainer",
    "xla",
    "spe",
    pytest.param("trainer_vs_fit", marks=SLOW),
    "cpu_precision",
    "efficiency",
    pytest.param("cifar_recipe", marks=SLOW),
    pytest.param("e2e", marks=SLOW),
    pytest.param("pipeline", marks=SLOW),
    pytest.param("scale", marks=SLOW),
    "photo_input",
    pytest.param("photo_ingest", marks=SLOW),
    "pixel_ingest",
    pytest.param("photo_pipeline", marks=SLOW),
    pytest.param("photo_memory", marks=SLOW),
    pytest.param("predict", marks=SLOW),
    pytest.param("predict_photos", marks=SLOW),
    pytest.param("pruning", marks=SLOW),
    pytest.param("evaluator_slices", marks=SLOW),
    pytest.param("attributions", marks=SLOW),
    pytest.param("model_card", marks=SLOW),
    pytest.param("runs", marks=SLOW),
    "preflight_memory",
]


def documented_figures() -> dict[str, list[tuple[re.Pattern, bool, str]]]:
    """Per row section, each documented figure as a pattern, whether it has a ratio, its target.

    A placeholder, `\\{name\\}` in the Markdown (escaped, or MkDocs' attribute lists would
    take it for one), stands for whatever the run put there: a model, a count.
    """
    text = DOCS.read_text()
    table = text[text.index(FIGURES_HEADING) :].split("\n\n")[1]
    figures: dict[str, list[tuple[re.Pattern, bool, str]]] = {}
    for line in table.splitlines()[2:]:  # after the header and its rule
        section, figure, ratio, target = (cell.strip() for cell in line.strip("|").split(" | "))
        literal_parts = re.split(r"\\\{\w+\\\}", figure)
        pattern = re.compile(".*?".join(map(re.escape, literal_parts)))
        figures.setdefault(section, []).append((pattern, ratio == "yes", target))
    return figures


@pytest.fixture(scope="module")
def settings(tmp_path_factory):
    """Smoke sizes, one work folder for the module: sections that read a finished run of the
    same dataset (predict, attributions, model_card, ...) share it, as in a real bench run."""
    from benchmarks import bench
    from tpu_pipeline.components.training.autograph import skip_autograph_for_graph_safe_code

    skip_autograph_for_graph_safe_code()  # as bench.main does before any section
    return bench.sized("smoke", tmp_path_factory.mktemp("bench"))


def test_every_bench_section_has_a_smoke_test_and_documented_figures():
    from benchmarks import bench

    names = [case if isinstance(case, str) else case.values[0] for case in SECTIONS]
    assert names == list(bench.SECTIONS)
    # A row's section is its bench section's, or `startup` (timed by e2e).
    assert set(documented_figures()) <= set(bench.SECTIONS) | {"startup"}


# Sections that read a finished run of a kind the test session makes anyway: section ->
# (the session fixture, its run folder from the fixture's value, where in the bench's work
# folder the section looks for a finished run before making its own: benchmarks/bench.py
# `_pushed_model`, runs_history.py `three_runs`). Copying it there saves a minute and a
# half of runs; `predict` still makes its own digits run, so making one stays tested.
SESSION_RUNS = {
    "predict_photos": ("signs_run", lambda made: made[2].run_dir, "predict-runs"),
    "runs": ("three_digits_runs", lambda made: made[0], "runs-history"),
}


def reuse_the_sessions_run(section: str, settings, request: pytest.FixtureRequest) -> None:
    """Copies the session's finished run that `section` reads into the bench's work folder."""
    import shutil

    if section not in SESSION_RUNS:
        return
    fixture, run_folder, subfolder = SESSION_RUNS[section]
    run_dir = run_folder(request.getfixturevalue(fixture))
    copy = settings.workdir / subfolder / run_dir.name
    if not copy.exists():
        shutil.copytree(run_dir, copy)


@pytest.mark.parametrize("section", SECTIONS)
def test_section_runs_at_smoke_size_and_returns_its_documented_rows(section, settings, request):
    from benchmarks import bench

    reuse_the_sessions_run(section, settings, request)
    rows = bench.SECTIONS[section](settings)

    assert rows, f"{section} returned no rows"
    documented = documented_figures()
    for row in rows:
        matches = [
            (has_ratio, target)
            for pattern, has_ratio, target in documented.get(row.section, [])
            if pattern.fullmatch(row.figure)
        ]
        assert matches, f"{row.figure!r} is not among docs/benchmarks.md's {row.section} figures"
        has_ratio, target = matches[0]
        if has_ratio:
            assert isinstance(row.ratio, float) and math.isfinite(row.ratio), row
        else:
            assert row.ratio is None, row
        assert row.target == target, row
        assert row.met is None if not target else isinstance(row.met, bool), row
        assert not re.search(r"\b(nan|inf)\b", row.measured), row
