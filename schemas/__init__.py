"""Curated schemas, one folder per dataset: `schemas/<dataset>/schema.pbtxt`.

A schema here is reviewed by a person (value ranges, shapes, label domain), not
re-inferred on every run: ExampleValidator checks each new batch of data against
it, so drifting data is rejected instead of silently redefining "normal". The
first run of a new dataset writes its schema here when this folder is part of a
source checkout (an editable install, as `make` and the images install it).
"""

import pathlib

SCHEMAS_DIR = pathlib.Path(__file__).resolve().parent


def schema_path(dataset_name: str) -> pathlib.Path:
    """Returns where the curated schema of `dataset_name` lives (it may not exist yet)."""
    return SCHEMAS_DIR / dataset_name / "schema.pbtxt"


def in_source_checkout() -> bool:
    """Whether this folder is a source checkout's (setup.py beside it), not an installed copy.

    A schema written into an installed package would be lost on the next install
    and is not under version control, so only a checkout's folder takes new ones.
    """
    return (SCHEMAS_DIR.parent / "setup.py").is_file()
