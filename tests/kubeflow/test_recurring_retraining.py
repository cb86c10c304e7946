"""Scheduled retraining, locally: span 1, then span 2 warm-started and compared with span 1's model.

Vertex AI runs the same pipeline on each schedule tick; what a tick does
(read the newest span, start from the last blessed model, push only a model
that is not worse) is the same locally, so it is tested here, end to end.
"""

from __future__ import annotations

import io
import pathlib
import shutil

import pytest
from ml_metadata import metadata_store
from tfx.orchestration import metadata

from pipeline.data_sources import write_digits_tfrecord
from pipeline.local_runner import run_local
from pipeline.run_record import custom_property
from tests.conftest import small_digits_config


def _example_spans(config) -> list[int]:
    """The span of every Examples artifact in ML Metadata, oldest first."""
    store = metadata_store.MetadataStore(
        metadata.sqlite_metadata_connection_config(str(config.metadata_path))
    )
    examples = sorted(store.get_artifacts_by_type("Examples"), key=lambda a: a.id)
    return [custom_property(a, "span") for a in examples]


@pytest.mark.slow
def test_second_span_retrains_warm_started_against_first_model(tmp_path: pathlib.Path):
    data_dir = tmp_path / "data"
    write_digits_tfrecord(data_dir / "span-1" / "digits.tfrecord")
    config = small_digits_config(
        tmp_path / "out",
        **{
            "dataset.data_dir": str(data_dir),
            "dataset.file_pattern": "span-{SPAN}/*.tfrecord",
            "trainer.warm_start": True,
            "trainer.train_steps": 200,
            "serving.tflite_variants": [],  # about spans and warm starts; digits_run checks them
        },
    )

    first = run_local(config, io.StringIO())
    assert first.succeeded, first.error
    assert first.blessed and first.push_note == "new version"
    assert first.trainer["warm_started"] is False  # nothing blessed yet to start from
    assert first.baseline_metrics is None

    # A new span arrives; the schedule's next run must pick it up by itself.
    (data_dir / "span-2").mkdir()
    shutil.copy(data_dir / "span-1" / "digits.tfrecord", data_dir / "span-2" / "digits.tfrecord")
    second = run_local(config, io.StringIO())

    assert second.succeeded, second.error
    assert _example_spans(config) == [1, 2]
    assert second.trainer["warm_started"] is True
    assert second.baseline_metrics is not None  # compared with span 1's blessed model
    # Pushed exactly when the Evaluator found it not worse than the baseline.
    assert (second.push_note == "new version") == second.blessed
    pushed = sorted(p.name for p in config.serving_dir.iterdir() if p.name.isdigit())
    assert len(pushed) == (2 if second.blessed else 1)
