"""`make bench` must at least start: its imports follow the code it measures."""

from benchmarks import bench


def test_the_benchmark_imports_and_offers_the_photo_sections():
    assert {"trainer", "e2e", "photo_input", "predict", "predict_photos"} <= set(bench.SECTIONS)
