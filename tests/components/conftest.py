"""Fixtures shared by the components' tests."""

from tests.components.object_store import object_store  # noqa: F401 (a fixture)
