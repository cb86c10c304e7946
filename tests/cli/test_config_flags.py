"""`--set FIELD=VALUE`: values read as YAML, and kept as strings when YAML cannot read them."""

import argparse

import pytest

from tpu_pipeline.cli.config_flags import (
    config_from_args,
    explicit_from_args,
    parse_assignment,
    recognized_from_args,
)
from tpu_pipeline.common.config import BUILTIN_DATA_DIR


@pytest.mark.parametrize(
    "text, expected",
    [
        ("trainer.epochs=3", ("trainer.epochs", 3)),
        ("trainer.profile_batches=[5, 8]", ("trainer.profile_batches", [5, 8])),
        ("dataset.label_drift_threshold=null", ("dataset.label_drift_threshold", None)),
        # A YAML alias to YAML, a file pattern to the user: kept as written.
        ("dataset.file_pattern=*/*.tfrecord", ("dataset.file_pattern", "*/*.tfrecord")),
    ],
)
def test_values_are_read_as_yaml_or_kept_as_written(text, expected):
    assert parse_assignment(text) == expected


def test_an_assignment_without_equals_is_a_usage_error():
    with pytest.raises(argparse.ArgumentTypeError, match="expected FIELD=VALUE"):
        parse_assignment("trainer.epochs")


def test_explicit_fields_are_the_users_not_a_built_in_datasets(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("dataset: signs\ntrainer:\n  epochs: 4\n")
    args = argparse.Namespace(config=str(config), assignments=[("trainer.seed", 1)])

    explicit = explicit_from_args(args, {"trainer.model": None, "output_dir": "out"})

    assert explicit == {"dataset", "trainer", "trainer.epochs", "trainer.seed", "output_dir"}


def _args(config=None, *assignments):
    return argparse.Namespace(config=config, assignments=list(assignments))


def test_a_folder_of_the_default_datasets_records_keeps_its_name_and_run_folder(tmp_path):
    """TFRecords laid out as the built-in digits (`pixels`, `label`, 8x8x1) were always read
    as digits with --data-dir alone: their run folder (and its history) stays."""
    from tpu_pipeline.pipeline.wiring.data_sources import write_digits_tfrecord

    write_digits_tfrecord(tmp_path / "digits.tfrecord")
    flags = {"dataset.data_dir": str(tmp_path)}

    assert recognized_from_args(_args(), flags) is None
    assert config_from_args(_args(), flags).dataset.name == "digits"


def test_a_named_dataset_or_another_format_leaves_the_folder_unrecognised(tmp_path):
    mnist = str(BUILTIN_DATA_DIR / "mnist")

    recognized = recognized_from_args(_args(), {"dataset.data_dir": mnist})
    assert recognized.dataset["pixel_feature"] == "image_floats"
    assert recognized_from_args(_args(), {"dataset": "mnist", "dataset.data_dir": mnist}) is None
    assert (
        recognized_from_args(_args(None, ("dataset.format", "csv")), {"dataset.data_dir": mnist})
        is None
    )
