"""A run that reads the two newest spans (`dataset.span_window: 2`, as the Vertex TPU configs
do) and slices by span and source folder, through the real local pipeline: TFX alone
refuses such a window at run time."""

from __future__ import annotations

import io
import json
import shutil

import numpy as np
import pytest
from sklearn.datasets import load_digits

from tests.conftest import small_digits_config
from tests.pipeline.test_span_shift_e2e import SETTINGS, write_span
from tpu_pipeline import schemas
from tpu_pipeline.common.config import ConfigError
from tpu_pipeline.pipeline.local.runner import run_local
from tpu_pipeline.pipeline.report import write_report

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def window_run(tmp_path_factory):
    """Spans 1 to 3, a third of the digits each, in two scanner folders per span; the run
    reads spans 2 and 3 and slices by span and by folder.

    Returns (config, summary, the message of the run refused for its schema first, and
    whether that run left a pipeline root)."""
    root = tmp_path_factory.mktemp("window")
    digits = load_digits()
    pixels, labels = digits.data.astype(np.float32), digits.target
    data_dir = root / "data"
    for span in (1, 2, 3):
        images, classes = pixels[span - 1 :: 3], labels[span - 1 :: 3]
        for scanner, part in (("scanner-a", slice(0, None, 2)), ("scanner-b", slice(1, None, 2))):
            write_span(
                data_dir / f"span-{span}" / scanner / "d.tfrecord", images[part], classes[part]
            )
    schema = root / "schema.pbtxt"  # the shipped digits schema: it has the optional span
    shutil.copy(schemas.SCHEMAS_DIR / "digits" / "schema.pbtxt", schema)
    settings = {
        **SETTINGS,
        "dataset.data_dir": str(data_dir),
        "dataset.file_pattern": "span-{SPAN}/*/*.tfrecord",
        "dataset.span_window": 2,
        "dataset.source_folder_slices": True,
        "dataset.schema_file": str(schema),
    }
    config = small_digits_config(root / "out", **settings)
    with pytest.raises(ConfigError) as refused:
        run_local(config, io.StringIO())
    message, left = str(refused.value), config.pipeline_root.exists()
    schema.write_text(schema.read_text() + message.split("add it to the schema: ", 1)[1])
    return config, run_local(config, io.StringIO()), message, left


def test_a_schema_without_the_folder_feature_stops_the_run_before_it_reads(window_run):
    config, _, message, left = window_run
    assert message.startswith(f"{config.dataset.schema_file}: has no 'source_folder' feature")
    assert not left  # refused before any component ran


def test_the_run_trains_and_evaluates_on_both_spans_of_its_window(window_run):
    _, summary, _, _ = window_run
    assert summary.succeeded, summary.error
    by_span = {s.value: s.examples for s in summary.slices if s.kind == "span"}
    assert set(by_span) == {"2", "3"}  # span 1 is outside the window
    by_class = sum(s.examples for s in summary.slices if s.kind == "class")
    assert sum(by_span.values()) == by_class  # every eval example is in one span slice
    # About eval_percent of the two spans' 1,198 digits each way, not of one span's 599.
    assert 0.15 * 1198 < by_class < 0.25 * 1198


def test_the_folder_slices_hold_each_scanner_of_both_spans(window_run):
    _, summary, _, _ = window_run
    by_folder = {s.value: s.examples for s in summary.slices if s.kind == "source_folder"}
    assert set(by_folder) == {"scanner-a", "scanner-b"}  # not span-2/scanner-a
    assert sum(by_folder.values()) == sum(s.examples for s in summary.slices if s.kind == "class")


def test_the_span_slices_are_in_the_summary_json_and_the_report(window_run, tmp_path):
    config, summary, _, _ = window_run
    slices = json.loads(summary.to_json())["slices"]
    assert [s["value"] for s in slices if s["kind"] == "span"] == ["2", "3"]
    html = write_report(config.run_dir, output_dir=tmp_path).html.read_text(encoding="utf-8")
    assert "<td>span</td>" in html
