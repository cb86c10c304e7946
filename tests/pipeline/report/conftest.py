"""A real rejected run, shared by the report tests that read one."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="package")
def rejected_run(rejected_cli_run):
    """The session's rejected run (tests/conftest.py): returns (exit code, run dir)."""
    result, _, output_dir = rejected_cli_run
    return result.returncode, output_dir / "tpu-pipeline-digits"
