"""Checks a candidate as a model server will serve it, before the Pusher publishes it.

TFX's InfraValidator does this, but TFX 1.16 cannot compile it for Vertex AI, so
the Pusher runs this check itself. A fresh server process loads a temporary copy
of the candidate (`<tmp>/<name>/1`, the layout a server reads) on loopback ports:
`tensorflow_model_server` where it is on PATH, else `model_server.py`, which
takes the same flags and answers the same REST API. Once the version is
AVAILABLE, the candidate's own warmup requests (eval examples, one request per
published signature, `warmup.py`) go to `:predict`; each answer must be
`num_classes` probabilities per example (the class id is their argmax, so a
right shape is a valid class). Everything, from starting the server to the last
answer, must fit in `serving.check_timeout_seconds`. Any failure names the
signature (or the load) and why, and the Pusher pushes nothing.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2

import components
from common.tfx_api import io_utils
from components.serving.export import SERVING_OUTPUT_KEY
from components.serving.warmup import read_warmup_requests, signature_defs

MODEL_SERVER = "tensorflow_model_server"
MODEL_NAME = "candidate"
# Loopback only: no proxy from the environment may take the check's requests.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_POLL_SECONDS = 0.2


class ServingCheckError(Exception):
    """The candidate failed the serving check; the message names the signature and why."""


@dataclasses.dataclass(frozen=True)
class ServingCheckResult:
    """A passed check: the signatures that answered, how long the answers and the server's
    start (process and model load) took, and which server."""

    signatures: tuple[str, ...]
    answer_seconds: float
    start_seconds: float
    server: str

    def to_text(self) -> str:
        return (
            f"passed ({', '.join(self.signatures)} in {self.answer_seconds:.1f} s; "
            f"{self.server} up in {self.start_seconds:.1f} s)"
        )


def server_command(base_path: str, grpc_port: int, rest_port: int) -> tuple[str, list[str]]:
    """The server's name and command: `tensorflow_model_server` if it is on PATH, else the
    Python server, with the same flags."""
    binary = shutil.which(MODEL_SERVER)
    name, program = (
        (MODEL_SERVER, [binary])
        if binary
        else ("model_server.py", [sys.executable, "-m", "components.serving.model_server"])
    )
    flags = [
        f"--port={grpc_port}",
        f"--rest_api_port={rest_port}",
        f"--model_name={MODEL_NAME}",
        f"--model_base_path={base_path}",
    ]
    return name, program + flags


def _server_env() -> dict[str, str]:
    """The Pusher's environment, quieter, with this package first so the server runs this code."""
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(components.__file__)))
    path = os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "TF_CPP_MIN_LOG_LEVEL": "2"}


def rest_body(request: predict_pb2.PredictRequest) -> dict[str, Any]:
    """A PredictRequest as TF Serving's REST API takes it: columnar, bytes as `{"b64": ...}`."""

    def json_value(value: Any) -> Any:
        if isinstance(value, bytes):
            return {"b64": base64.b64encode(value).decode()}
        if isinstance(value, list):
            return [json_value(item) for item in value]
        return value

    inputs = {
        key: json_value(tf.make_ndarray(proto).tolist()) for key, proto in request.inputs.items()
    }
    return {"signature_name": request.model_spec.signature_name, "inputs": inputs}


def answer_problem(outputs: Any, examples: int, num_classes: int) -> str | None:
    """What is wrong with a `:predict` answer's `outputs` for `examples` inputs, or None."""
    if isinstance(outputs, dict):  # a signature with several outputs names them
        if SERVING_OUTPUT_KEY not in outputs:
            return f"answered {sorted(outputs)}, not {SERVING_OUTPUT_KEY!r}"
        outputs = outputs[SERVING_OUTPUT_KEY]
    try:
        probabilities = np.asarray(outputs, dtype=np.float64)
    except (TypeError, ValueError):
        return "answered a ragged or non-numeric array"
    if probabilities.shape != (examples, num_classes):
        return (
            f"answered shape {list(probabilities.shape)}, expected [{examples}, {num_classes}] "
            f"({num_classes} class probabilities per example)"
        )
    if not np.all(np.isfinite(probabilities)) or np.any((probabilities < 0) | (probabilities > 1)):
        return "answered values outside 0..1: not probabilities"
    sums = probabilities.sum(axis=1)
    if not np.allclose(sums, 1.0, atol=1e-3):
        return f"answered probabilities that sum to {sums.min():.4f}..{sums.max():.4f}, not 1"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _log_tail(log_path: str) -> str:
    with open(log_path, errors="replace") as log:
        lines = [line.strip() for line in log if line.strip()]
    return lines[-1] if lines else "no output"


def _wait_until_available(
    url: str, server: subprocess.Popen, log_path: str, deadline: float, budget: float
) -> None:
    while True:
        if server.poll() is not None:
            raise ServingCheckError(
                f"the model server could not load the model (exit {server.returncode}): "
                f"{_log_tail(log_path)}"
            )
        try:
            with _OPENER.open(
                url, timeout=max(deadline - time.monotonic(), _POLL_SECONDS)
            ) as reply:
                states = json.load(reply).get("model_version_status", [])
            if any(state.get("state") == "AVAILABLE" for state in states):
                return
        except (urllib.error.URLError, OSError, ValueError):
            pass  # not listening yet, or still loading
        if time.monotonic() > deadline:
            raise ServingCheckError(
                f"the model server did not load the model within {budget:g} s "
                "(serving.check_timeout_seconds)"
            )
        time.sleep(_POLL_SECONDS)


def _is_timeout(error: BaseException) -> bool:
    reason = getattr(error, "reason", error)  # urllib wraps a timeout while connecting
    return isinstance(reason, (TimeoutError, socket.timeout))


def _predict(url: str, request: predict_pb2.PredictRequest, deadline: float, budget: float) -> Any:
    """The `outputs` the server answers to `request`, sent by REST within the deadline."""
    name = request.model_spec.signature_name
    late = f"signature {name!r}: no answer within {budget:g} s (serving.check_timeout_seconds)"
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise ServingCheckError(late)
    data = json.dumps(rest_body(request)).encode()
    try:
        with _OPENER.open(urllib.request.Request(url, data=data), timeout=remaining) as reply:
            return json.load(reply)["outputs"]
    except urllib.error.HTTPError as error:  # TF Serving's errors: {"error": "..."}
        detail = error.read().decode(errors="replace")
        try:
            detail = json.loads(detail)["error"]
        except (ValueError, KeyError, TypeError):
            pass
        raise ServingCheckError(
            f"signature {name!r}: the server answered {error.code}: {detail}"
        ) from None
    except OSError as error:  # URLError, a refused or reset connection, a timeout
        raise ServingCheckError(
            late if _is_timeout(error) else f"signature {name!r}: {error}"
        ) from None
    except (KeyError, ValueError) as error:
        raise ServingCheckError(
            f"signature {name!r}: an answer without outputs ({error})"
        ) from None


def _stop(server: subprocess.Popen) -> None:
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def check_model(model_dir: str, num_classes: int, timeout_seconds: float) -> ServingCheckResult:
    """Serves `model_dir` from a fresh server process and checks every signature's answer.

    Raises:
      ServingCheckError: a signature without a warmup request, a model that does
        not load, an answer that is an error, the wrong shape or not
        probabilities, or no answer within `timeout_seconds`.
    """
    try:
        requests = read_warmup_requests(model_dir)
    except FileNotFoundError as error:
        raise ServingCheckError(str(error)) from None
    signatures = tuple(request.model_spec.signature_name for request in requests)
    unchecked = sorted(set(signature_defs(model_dir)) - set(signatures))
    if unchecked:
        raise ServingCheckError(f"signature(s) {unchecked}: no request in the warmup file")
    with tempfile.TemporaryDirectory(prefix="serving-check-") as workdir:
        base_path = os.path.join(workdir, MODEL_NAME)
        io_utils.copy_dir(model_dir, os.path.join(base_path, "1"))
        rest_port = _free_port()
        server_name, command = server_command(base_path, _free_port(), rest_port)
        url = f"http://127.0.0.1:{rest_port}/v1/models/{MODEL_NAME}"
        log_path = os.path.join(workdir, "server.log")
        start = time.monotonic()
        deadline = start + timeout_seconds
        with open(log_path, "w") as log:
            server = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, env=_server_env()
            )
        try:
            _wait_until_available(url, server, log_path, deadline, timeout_seconds)
            available = time.monotonic()
            for request in requests:
                outputs = _predict(f"{url}:predict", request, deadline, timeout_seconds)
                examples = len(tf.make_ndarray(next(iter(request.inputs.values()))))
                problem = answer_problem(outputs, examples, num_classes)
                if problem:
                    raise ServingCheckError(
                        f"signature {request.model_spec.signature_name!r}: {problem}"
                    )
        finally:
            _stop(server)
        return ServingCheckResult(
            signatures, time.monotonic() - available, available - start, server_name
        )
