"""A `gs://` filesystem for tests that behaves like Cloud Storage where a push cares.

Objects are flat keys that appear whole once their upload completes; folders
exist only as key prefixes; renaming a folder copies and deletes object by
object, in listing order (what `tf.io.gfile.rename` does on GCS). Every change
is recorded, so a test can check what a reader could see between any two.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from tfx.dsl.io import filesystem, filesystem_registry
from tfx.dsl.io.plugins.local import LocalFilesystem


class ObjectStore(filesystem.Filesystem):
    SUPPORTED_SCHEMES = ["gs://"]
    objects: dict[str, bytes]
    history: list[dict[str, bytes]]  # every state after a change, oldest first

    @classmethod
    def _changed(cls) -> None:
        cls.history.append(dict(cls.objects))

    @classmethod
    def _under(cls, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        return sorted(key for key in cls.objects if key.startswith(prefix))

    @classmethod
    def open(cls, name, mode="r"):
        if "w" in mode:
            return _Upload(cls, name, binary="b" in mode)
        if name not in cls.objects:
            raise filesystem.NotFoundError(name)
        data = cls.objects[name]
        return io.BytesIO(data) if "b" in mode else io.StringIO(data.decode())

    @classmethod
    def copy(cls, src, dst, overwrite=False):
        if dst in cls.objects and not overwrite:
            raise OSError(f"{dst} exists")
        cls.objects[dst] = cls.objects[src]
        cls._changed()

    @classmethod
    def exists(cls, path):
        return path in cls.objects or bool(cls._under(path))

    @classmethod
    def isdir(cls, path):
        return bool(cls._under(path))

    @classmethod
    def listdir(cls, path):
        prefix = path.rstrip("/") + "/"
        return sorted({key[len(prefix) :].split("/")[0] for key in cls._under(path)})

    @classmethod
    def makedirs(cls, path):
        """Object stores have no folders: nothing to create."""

    mkdir = makedirs

    @classmethod
    def remove(cls, path):
        del cls.objects[path]
        cls._changed()

    @classmethod
    def rmtree(cls, path):
        for key in cls._under(path):
            cls.remove(key)

    @classmethod
    def rename(cls, src, dst, overwrite=False):
        for key in cls._under(src) or [src]:
            cls.copy(key, dst.rstrip("/") + key[len(src.rstrip("/")) :], overwrite)
            cls.remove(key)

    @classmethod
    def files_under(cls, path: str, state: dict[str, bytes] | None = None) -> dict[str, bytes]:
        """The objects below `path` (in `state`, default now), by path relative to it."""
        prefix = path.rstrip("/") + "/"
        state = cls.objects if state is None else state
        return {key[len(prefix) :]: data for key, data in state.items() if key.startswith(prefix)}


class _Upload(io.BytesIO):
    """An object being written: it appears when closed, whole."""

    def __init__(self, store: type[ObjectStore], name: str, binary: bool):
        super().__init__()
        self._store, self._name, self._binary = store, name, binary

    def write(self, data):
        return super().write(data if self._binary else data.encode())

    def close(self):
        if not self.closed:
            self._store.objects[self._name] = self.getvalue()
            self._store._changed()
        super().close()


@pytest.fixture
def object_store(monkeypatch) -> Iterator[type[ObjectStore]]:
    """Routes `gs://` paths given to TFX's fileio to a fresh in-memory object store."""
    store = type("Bucket", (ObjectStore,), {"objects": {}, "history": []})
    registry = filesystem_registry.FilesystemRegistry()
    registry.register(LocalFilesystem, priority=0)
    registry.register(store, priority=0)
    monkeypatch.setattr(filesystem_registry, "DEFAULT_FILESYSTEM_REGISTRY", registry)
    yield store
