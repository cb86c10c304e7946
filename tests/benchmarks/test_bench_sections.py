"""`make bench` must at least start: its imports follow the code it measures."""

import pytest


def test_the_benchmark_imports_and_offers_the_photo_sections():
    # Imported here, not at the top: collecting the suite must not load TF, Beam and tfmot.
    from benchmarks import bench

    offered = set(bench.SECTIONS)
    assert {"trainer", "e2e", "photo_input", "predict", "predict_photos"} <= offered
    assert {"trainer_vs_fit", "cpu_precision"} <= offered
    assert "runs" in offered  # `tpu-pipeline runs` and logging to MLflow, timed


def test_a_workdir_holding_the_users_files_is_refused_and_nothing_in_it_is_removed(tmp_path):
    from benchmarks import bench

    mine = tmp_path / "results" / "e2e-ours" / "notes.txt"  # a name a section clears
    mine.parent.mkdir(parents=True)
    mine.write_text("the user's")

    with pytest.raises(SystemExit) as refused:
        bench.main(["--smoke", "--only", "e2e", "--workdir", str(tmp_path / "results")])

    assert refused.value.code == 2
    assert mine.read_text() == "the user's"
    assert not (tmp_path / "results" / ".tpu-pipeline").exists()


def test_a_new_workdir_is_claimed_and_taken_again_by_the_next_bench_run(tmp_path):
    from benchmarks import bench

    workdir = tmp_path / "bench"
    for _ in range(2):  # the second run finds the bench's own folder, marked
        assert bench.main(["--smoke", "--only", "cpu_precision", "--workdir", str(workdir)]) == 0
    assert (workdir / ".tpu-pipeline").exists()


def test_without_a_workdir_the_bench_removes_its_own_folder(tmp_path, monkeypatch):
    import tempfile

    from benchmarks import bench

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the temporary folder it uses
    assert bench.main(["--smoke", "--only", "cpu_precision"]) == 0
    # It kept the data and runs until it ended, no longer (AutoGraph's own files aside).
    assert list(tmp_path.glob("tpu-pipeline-*")) == []
