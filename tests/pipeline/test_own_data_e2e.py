"""A user's own data in another format, end to end: numpy archive -> schema -> pushed model.

The first run converts the data and stops at the missing schema, saying how to
bootstrap one; with the inferred schema the second run trains, blesses and pushes.
"""

from __future__ import annotations

import io

import pytest

from cli.synthetic_data import write_synthetic
from common.config import load_config
from pipeline.local_runner import run_local
from pipeline.report.collect import SAMPLES_SHOWN, collect_report
from pipeline.schema_tools import infer_schema, write_schema
from tests.pipeline.e2e_helpers import serving_accuracy

pytestmark = pytest.mark.slow


def test_numpy_archive_runs_end_to_end_after_bootstrapping_its_schema(tmp_path):
    data_dir = write_synthetic(tmp_path / "raw", "npz", 600, "mnist", 120, seed=3)
    overrides = {
        "output_dir": str(tmp_path / "out"),
        "dataset": {
            "name": "own-digits",
            "data_dir": str(data_dir),
            "format": "npz",
            "image_shape": [28, 28, 1],
            "pixel_feature": "pixels",
            "label_feature": "label",
            "num_classes": 10,
        },
        "trainer.train_steps": 120,
    }
    config = load_config(None, overrides)

    first = run_local(config, io.StringIO())
    assert not first.succeeded
    assert "has no curated schema" in first.error
    assert "tpu-pipeline schema infer --data " in first.error
    train_split = first.error.split("--data ")[1].split(" ")[0]

    schema_file = tmp_path / "schema.pbtxt"
    write_schema(infer_schema(f"{train_split}/*"), schema_file)
    config = load_config(None, {**overrides, "dataset.schema_file": str(schema_file)})
    second = run_local(config, io.StringIO())
    assert second.succeeded, second.error
    statuses = {c.id: c.status for c in second.components}
    assert statuses["Trainer"] == "executed"
    assert second.metrics["example_count"] == 120  # the archive's own test split
    assert second.blessed and second.pushed_model
    assert serving_accuracy(second.pushed_model, config) == pytest.approx(
        second.metrics["accuracy"], abs=1e-6
    )

    # The report reads its sample predictions from this format's ExampleGen too.
    report = collect_report(config.run_dir, second, config)
    samples = report.samples
    assert samples is not None, "the report has no sample predictions for an npz run"
    assert samples.examined == 120
    assert len(samples.predicted) == len(samples.true_labels) == SAMPLES_SHOWN
    assert samples.images.shape[1:] == (28, 28, 1)
    shown_accuracy = 1 - samples.mistakes / samples.examined
    assert shown_accuracy == pytest.approx(second.metrics["accuracy"], abs=1e-6)
