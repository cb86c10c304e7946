"""Curated schemas, one folder per dataset: `schemas/<dataset>/schema.pbtxt`.

A schema here is reviewed by a person (value ranges, shapes, label domain), not
re-inferred on every run: ExampleValidator checks each new batch of data against
it, so drifting data is rejected instead of silently redefining "normal".
"""

import pathlib

SCHEMAS_DIR = pathlib.Path(__file__).resolve().parent


def schema_path(dataset_name: str) -> pathlib.Path:
    """Returns where the curated schema of `dataset_name` lives (it may not exist yet)."""
    return SCHEMAS_DIR / dataset_name / "schema.pbtxt"
