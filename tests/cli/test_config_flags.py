"""`--set FIELD=VALUE`: values read as YAML, and kept as strings when YAML cannot read them."""

import argparse

import pytest

from cli.config_flags import explicit_from_args, parse_assignment


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
