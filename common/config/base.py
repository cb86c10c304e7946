"""What every section of the configuration shares: strict parsing and one error type.

Apart from the sections so that each of them, and `load_config`, imports it without
importing one another.
"""

from __future__ import annotations

import pathlib

from pydantic import BaseModel, ConfigDict

# The folder holding common/ (this file is common/config/base.py).
REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]


class ConfigError(ValueError):
    """A configuration file or flag holds a value that is not allowed."""


class _Section(BaseModel):
    # Unknown keys are typos: reject them instead of silently ignoring them.
    model_config = ConfigDict(extra="forbid", frozen=True)
