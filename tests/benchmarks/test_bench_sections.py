"""`make bench` must at least start: its imports follow the code it measures."""


def test_the_benchmark_imports_and_offers_the_photo_sections():
    # Imported here, not at the top: collecting the suite must not load TF, Beam and tfmot.
    from benchmarks import bench

    offered = set(bench.SECTIONS)
    assert {"trainer", "e2e", "photo_input", "predict", "predict_photos"} <= offered
    assert {"trainer_vs_fit", "cpu_precision"} <= offered
    assert "runs" in offered  # `tpu-pipeline runs` and logging to MLflow, timed
