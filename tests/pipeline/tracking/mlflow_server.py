"""A real MLflow tracking server for tests: `mlflow server` from the venv, SQLite backend,
artifacts served from a local folder, on a free loopback port; stopped with its workers."""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import portpicker

START_TIMEOUT_S = 180  # a first start migrates the SQLite store: tens of seconds on a busy machine


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@contextlib.contextmanager
def mlflow_server(folder: pathlib.Path) -> Iterator[str]:
    """Yields the URL of a tracking server storing into `folder`; stops it at the end."""
    folder.mkdir(parents=True, exist_ok=True)
    port = portpicker.pick_unused_port()
    url = f"http://127.0.0.1:{port}"
    mlflow = pathlib.Path(sys.executable).parent / "mlflow"
    command = [
        str(mlflow),
        "server",
        "--backend-store-uri",
        f"sqlite:///{folder / 'mlflow.db'}",
        "--artifacts-destination",
        str(folder / "artifacts"),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    log = (folder / "server.log").open("wb")
    # A session of its own: the server's workers are stopped with it, and nothing else.
    server = subprocess.Popen(command, stdout=log, stderr=log, start_new_session=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _answers(url):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"mlflow server did not start: {(folder / 'server.log').read_text()[-2000:]}"
                )
            time.sleep(0.5)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()
