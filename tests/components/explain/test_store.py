"""Attributions kept as two files, the index last: read back whole, or None if unfinished."""

import numpy as np

from tpu_pipeline.components.explain.choice import Chosen
from tpu_pipeline.components.explain.store import (
    Attributions,
    display_pixels,
    read_attributions,
    write_attributions,
)


def _attributions(count: int = 2) -> Attributions:
    rng = np.random.default_rng(0)
    return Attributions(
        chosen=[Chosen(i, i % 2, 1, 0.5 + i / 10, source=f"f.png:{i}") for i in range(count)],
        images=rng.integers(0, 256, (count, 8, 6, 3)).astype(np.uint8),
        maps=rng.random((count, 8, 6)).astype(np.float32),
        method="xrai",
        settings={"steps": 16, "baselines": ["black", "white"], "seconds": 1.5},
    )


def test_a_written_folder_reads_back_the_same(tmp_path):
    written = _attributions()
    write_attributions(str(tmp_path / "a"), written)
    read = read_attributions(str(tmp_path / "a"))
    assert read.chosen == written.chosen
    np.testing.assert_array_equal(read.images, written.images)
    np.testing.assert_allclose(read.maps, written.maps, atol=1e-3)  # kept as float16
    assert (read.method, read.settings, read.method_name) == ("xrai", written.settings, "XRAI")


def test_a_folder_without_its_index_is_an_unfinished_step(tmp_path):
    write_attributions(str(tmp_path / "a"), _attributions())
    (tmp_path / "a" / "attributions.json").unlink()
    assert read_attributions(str(tmp_path / "a")) is None
    assert read_attributions(str(tmp_path / "never")) is None


def test_display_pixels_scale_the_signatures_range_to_8_bits():
    pixels = np.array([0.0, 8.0, 16.0, 20.0, -1.0])
    np.testing.assert_array_equal(display_pixels(pixels, 0, 16), [0, 128, 255, 255, 0])
