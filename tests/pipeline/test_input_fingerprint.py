"""`run --if-new-data`'s fingerprint: new files, changed files, new spans, and nothing new."""

from __future__ import annotations

import os
import pathlib

import pytest

from tpu_pipeline.common.config import load_config
from tpu_pipeline.pipeline.wiring.input_fingerprint import (
    LAST_SUCCESS_FILE,
    fingerprint_inputs,
    new_inputs,
    read_last_success,
    record_success,
)

SPANS = {"dataset.data_dir": "DATA", "dataset.file_pattern": "span-{SPAN}/*.tfrecord"}


def spans_config(tmp_path: pathlib.Path, **overrides):
    settings = {**SPANS, "dataset.data_dir": str(tmp_path / "data"), "output_dir": str(tmp_path)}
    return load_config(None, {**settings, **overrides})


def write(path: pathlib.Path, data: bytes = b"records") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


@pytest.fixture
def recorded(tmp_path):
    """A run folder whose last successful run read span-1/a.tfrecord; returns its config."""
    config = spans_config(tmp_path)
    write(tmp_path / "data" / "span-1" / "a.tfrecord")
    config.run_dir.mkdir(parents=True)
    data_root = tmp_path / "data"
    record_success(
        config.run_dir, fingerprint_inputs(config, data_root, ("span-{SPAN}/*.tfrecord",))
    )
    return config


def test_nothing_new_since_the_last_successful_run(recorded):
    assert new_inputs(recorded) is None


def test_a_new_span_is_new_data(recorded, tmp_path):
    write(tmp_path / "data" / "span-2" / "a.tfrecord")
    assert (
        new_inputs(recorded)
        == "new or changed input since the last successful run: span-2/a.tfrecord"
    )


def test_a_new_file_in_a_span_is_new_data_but_a_file_no_pattern_matches_is_not(recorded, tmp_path):
    write(tmp_path / "data" / "span-1" / "README.md")
    write(tmp_path / "data" / ".span-3.partial" / "a.tfrecord")  # a span import under way
    assert new_inputs(recorded) is None
    write(tmp_path / "data" / "span-1" / "b.tfrecord")
    assert (
        new_inputs(recorded)
        == "new or changed input since the last successful run: span-1/b.tfrecord"
    )


def test_a_file_rewritten_with_the_same_size_in_the_same_second_is_changed(recorded, tmp_path):
    path = tmp_path / "data" / "span-1" / "a.tfrecord"
    before = path.stat()
    write(path, b"RECORDS")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1))  # 1 ns later
    assert (
        new_inputs(recorded)
        == "new or changed input since the last successful run: span-1/a.tfrecord"
    )


def test_a_removed_file_is_a_change(recorded, tmp_path):
    (tmp_path / "data" / "span-1" / "a.tfrecord").unlink()
    assert (
        new_inputs(recorded)
        == "new or changed input since the last successful run: span-1/a.tfrecord"
    )


def test_another_configuration_counts_as_new_but_another_webhook_does_not(recorded, tmp_path):
    webhook = spans_config(tmp_path, **{"notify.webhook": "https://hooks.example.com/x"})
    assert new_inputs(webhook) is None
    assert new_inputs(spans_config(tmp_path, **{"trainer.epochs": 3})) == (
        "the configuration changed since the last successful run"
    )


def test_a_run_folder_without_a_successful_run_always_runs(tmp_path):
    config = spans_config(tmp_path)
    assert new_inputs(config) == "no successful run in this run folder yet"
    config.run_dir.mkdir(parents=True)
    (config.run_dir / LAST_SUCCESS_FILE).write_text("{not json")  # a damaged record: run
    assert read_last_success(config.run_dir) is None
    assert new_inputs(config) == "no successful run in this run folder yet"


def test_every_change_tfx_examplegen_sees_in_the_latest_span_is_seen(tmp_path):
    """Ours is stricter than TFX's own input fingerprint, never blind where it sees a change."""
    from tpu_pipeline.common.tfx_api import example_gen_pb2, example_gen_utils, range_config_pb2

    data_root, pattern = tmp_path / "data", "span-{SPAN}/*.tfrecord"
    config = spans_config(tmp_path)
    write(data_root / "span-1" / "a.tfrecord")
    # What ExampleGen's FileBasedInputProcessor passes for a {SPAN} pattern: the latest span.
    latest = range_config_pb2.RangeConfig(rolling_range=range_config_pb2.RollingRange(num_spans=1))

    def both():
        split = example_gen_pb2.Input.Split(name="all", pattern=pattern)  # TFX fills in {SPAN}
        tfx = example_gen_utils.calculate_splits_fingerprint_span_and_version(
            str(data_root), [split], latest
        )
        return tfx, fingerprint_inputs(config, data_root, (pattern,))

    changes = [
        lambda: write(data_root / "span-1" / "b.tfrecord"),  # a new file
        lambda: write(data_root / "span-1" / "a.tfrecord", b"longer records"),  # a changed one
        lambda: write(data_root / "span-2" / "a.tfrecord"),  # a new span
    ]
    for change in changes:
        tfx_before, ours_before = both()
        change()
        tfx_after, ours_after = both()
        assert tfx_after != tfx_before  # each is a change ExampleGen sees
        assert ours_after.changes_since(ours_before) is not None


def test_the_data_digest_names_the_files_whatever_the_configuration_or_folder(tmp_path):
    """`tpu-pipeline runs` says two runs read the same data by this digest."""
    import shutil

    write(tmp_path / "data" / "span-1" / "a.tfrecord")
    pattern = ("span-{SPAN}/*.tfrecord",)
    first = fingerprint_inputs(spans_config(tmp_path), tmp_path / "data", pattern)
    other_config = spans_config(tmp_path, **{"trainer.epochs": 3})
    same_files = fingerprint_inputs(other_config, tmp_path / "data", pattern)
    assert same_files.data_digest() == first.data_digest()
    assert same_files.digest() != first.digest()  # the whole input fingerprint saw the config
    shutil.copytree(tmp_path / "data", tmp_path / "moved")  # a copy keeps sizes and times
    moved = fingerprint_inputs(spans_config(tmp_path), tmp_path / "moved", pattern)
    assert moved.data_digest() == first.data_digest()
    write(tmp_path / "data" / "span-2" / "b.tfrecord")
    newer = fingerprint_inputs(spans_config(tmp_path), tmp_path / "data", pattern)
    assert newer.data_digest() != first.data_digest()
