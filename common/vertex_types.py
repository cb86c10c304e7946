"""Vertex AI's request and resource types (`google.cloud.aiplatform_v1.types`), loaded on first use.

Importing the SDK loads every service client: about a third of collecting the whole test
suite, paid by every command and test that never builds a request. The modules that build
requests name the types through this module (`from common import vertex_types as gca`),
so `gca.Model(...)` imports the SDK the first time a request is built, not at import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from google.cloud.aiplatform_v1.types import *  # noqa: F403 (what type checkers see)


def __getattr__(name: str) -> Any:
    if name.startswith("_"):  # what tools probe (pytest's fixture scan), never a Vertex type
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module("google.cloud.aiplatform_v1.types"), name)
