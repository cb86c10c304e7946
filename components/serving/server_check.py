"""Checks a candidate as a model server will serve it, before the Pusher publishes it.

TFX's InfraValidator does this, but TFX 1.16 cannot compile it for Vertex AI, so
the Pusher runs this check itself. A fresh server process loads a temporary copy
of the candidate (`<tmp>/<name>/1`, the layout a server reads) on loopback ports:
`tensorflow_model_server` where it is on PATH (the pipeline image installs it),
else `model_server.py`, which takes the same flags and answers the same REST
API. `tensorflow_model_server` must be told its ports: they come from
`portpicker` (reserved by a port server when `PORTSERVER_ADDRESS` names one);
`model_server.py` binds port 0 and says in its log which port it got, so no
other process can take it in between. The server is killed with the process
that started it, even by SIGKILL (`common/child_process.py`). A local run starts
the Python server's process ahead (`start_server_ahead`, once the model to push is
made), so its TensorFlow import, most of its start, overlaps the Evaluator; the
check hands that process its flags and log. Once the version is
AVAILABLE, the candidate's own warmup requests (eval examples, one request per
published signature, `warmup.py`) go to `:predict`; each answer must be
`num_classes` probabilities per example (the class id is their argmax, so a
right shape is a valid class). Everything, from starting the server to the last
answer, must fit in `serving.check_timeout_seconds`. Any failure names the
signature (or the load), why, and which server checked, and the Pusher pushes nothing.
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
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import numpy as np
import portpicker
import tensorflow as tf
from absl import logging
from tensorflow_serving.apis import predict_pb2

from tpu_pipeline import components
from tpu_pipeline.common.child_process import start_child, stop_child
from tpu_pipeline.common.tfx_api import io_utils
from tpu_pipeline.common.work_dirs import WorkDirs
from tpu_pipeline.components.serving.export import SERVING_OUTPUT_KEY
from tpu_pipeline.components.serving.model_server import FLAGS_FROM_STDIN, reported_port
from tpu_pipeline.components.serving.warmup import read_warmup_requests, signature_defs

MODEL_SERVER = "tensorflow_model_server"
# Where tensorflow_model_server is not on PATH: components/serving/model_server.py.
FALLBACK_SERVER = "model_server.py"
MODEL_NAME = "candidate"
# The check's copy of the candidate and the server's log, in the temporary folder; one a
# killed Pusher left is removed by the next check.
WORK_DIRS = WorkDirs("serving-check", "serving check's work folder")
PYTHON_SERVER_MODULE = "tpu_pipeline.components.serving.model_server"
# Loopback only: no proxy from the environment may take the check's requests.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_POLL_SECONDS = 0.2


class ServingCheckError(Exception):
    """The candidate failed the serving check; the message names the signature, why, and the
    server that checked it (`server`, None when the check failed before starting one)."""

    def __init__(self, message: str, server: str | None = None):
        super().__init__(f"{message} (checked with {server})" if server else message)
        self.server = server


@dataclasses.dataclass(frozen=True)
class ServingCheckResult:
    """A passed check: the signatures that answered, how long the answers and the server's
    start (process and model load) took, and which server."""

    signatures: tuple[str, ...]
    answer_seconds: float
    start_seconds: float  # from the start, or from the hand-over to a server started ahead
    server: str
    started_ahead: bool = False

    def to_text(self) -> str:
        ahead = ", started ahead" if self.started_ahead else ""
        return (
            f"passed ({', '.join(self.signatures)} in {self.answer_seconds:.1f} s; "
            f"{self.server}{ahead} up in {self.start_seconds:.1f} s)"
        )


@dataclasses.dataclass(frozen=True)
class ServerCommand:
    """How to start the check's server: its name, its command, and its REST port when the
    port is chosen before it starts (None: the server binds port 0 and reports the port)."""

    name: str
    argv: list[str]
    rest_port: int | None


def server_command(base_path: str) -> ServerCommand:
    """`tensorflow_model_server` if it is on PATH, with ports from portpicker, else the Python
    server, on a port it binds itself."""
    model_flags = [f"--model_name={MODEL_NAME}", f"--model_base_path={base_path}"]
    binary = shutil.which(MODEL_SERVER)
    if binary:  # it takes its ports as flags: portpicker's are free and handed out once
        grpc_port, rest_port = portpicker.pick_unused_port(), portpicker.pick_unused_port()
        ports = [f"--port={grpc_port}", f"--rest_api_port={rest_port}"]
        return ServerCommand(MODEL_SERVER, [binary, *ports, *model_flags], rest_port)
    python_server = [sys.executable, "-m", PYTHON_SERVER_MODULE]
    return ServerCommand(FALLBACK_SERVER, [*python_server, "--rest_api_port=0", *model_flags], None)


# The Python server's process started ahead of the next check, waiting for its flags.
_ahead: subprocess.Popen | None = None
_ahead_lock = threading.Lock()


def start_server_ahead() -> None:
    """Starts the Python server's process now, to wait for the next check's model.

    Its start is mostly importing TensorFlow (2-3 s); started while the steps before the
    Pusher run, that time overlaps theirs. Nothing is started where
    `tensorflow_model_server` is on PATH (it starts in well under a second) or where a
    server already waits. A server no check takes is stopped by `stop_server_ahead`, and
    ends by itself when this process ends (its input closes; by SIGKILL too). A process
    that cannot be started now (no memory, no process slot) is only a lost head start: the
    check starts its own, and says why if that fails too.
    """
    global _ahead
    with _ahead_lock:
        if shutil.which(MODEL_SERVER) or (_ahead is not None and _ahead.poll() is None):
            return
        try:
            _ahead = start_child(
                [sys.executable, "-m", PYTHON_SERVER_MODULE, FLAGS_FROM_STDIN],
                _server_env(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                stdin=subprocess.PIPE,
            )
        except OSError as error:
            logging.warning("Serving check: no server started ahead (%s)", error)


def _take_server_ahead() -> subprocess.Popen | None:
    """The server started ahead, no longer waiting for anyone else; None if there is none."""
    global _ahead
    with _ahead_lock:
        waiting, _ahead = _ahead, None
    return waiting


def stop_server_ahead() -> None:
    """Stops a server started ahead that no check took (a run that pushed nothing)."""
    waiting = _take_server_ahead()
    if waiting is not None:
        stop_child(waiting)


def _hand_over(command: ServerCommand, log_path: str) -> subprocess.Popen | None:
    """The server started ahead, given `command`'s flags and `log_path`; None if there is
    none, or it died, or `command` is not the Python server's (PATH changed since)."""
    waiting = _take_server_ahead()
    if waiting is None:
        return None
    if command.name != FALLBACK_SERVER or waiting.poll() is not None:
        stop_child(waiting)
        return None
    flags = command.argv[command.argv.index(PYTHON_SERVER_MODULE) + 1 :]
    try:
        waiting.stdin.write(json.dumps({"flags": flags, "log": log_path}) + "\n")
        waiting.stdin.close()
    except OSError:  # it ended between the poll and the write
        stop_child(waiting)
        return None
    return waiting


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


def _log_tail(log_path: str) -> str:
    with open(log_path, errors="replace") as log:
        lines = [line.strip() for line in log if line.strip()]
    return lines[-1] if lines else "no output"


def _wait_until_available(
    command: ServerCommand, server: subprocess.Popen, log_path: str, deadline: float, budget: float
) -> str:
    """The model's URL on the server, once its version is AVAILABLE."""
    port = command.rest_port
    while True:
        if server.poll() is not None:
            raise ServingCheckError(
                f"the model server could not load the model (exit {server.returncode}): "
                f"{_log_tail(log_path)}"
            )
        if port is None:  # model_server.py says which port it bound once it listens
            with open(log_path, errors="replace") as log:
                port = reported_port(log.read())
        if port is not None:
            url = f"http://127.0.0.1:{port}/v1/models/{MODEL_NAME}"
            try:
                with _OPENER.open(
                    url, timeout=max(deadline - time.monotonic(), _POLL_SECONDS)
                ) as reply:
                    states = json.load(reply).get("model_version_status", [])
                if any(state.get("state") == "AVAILABLE" for state in states):
                    return url
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
    with WORK_DIRS.owned() as workdir:
        base_path = os.path.join(workdir, MODEL_NAME)
        io_utils.copy_dir(model_dir, os.path.join(base_path, "1"))
        command = server_command(base_path)
        log_path = os.path.join(workdir, "server.log")
        start = time.monotonic()
        deadline = start + timeout_seconds
        with open(log_path, "w") as log:
            server = _hand_over(command, log_path)
            started_ahead = server is not None
            if server is None:
                server = start_child(
                    command.argv, _server_env(), stdout=log, stderr=subprocess.STDOUT
                )
        try:
            url = _wait_until_available(command, server, log_path, deadline, timeout_seconds)
            available = time.monotonic()
            for request in requests:
                outputs = _predict(f"{url}:predict", request, deadline, timeout_seconds)
                examples = len(tf.make_ndarray(next(iter(request.inputs.values()))))
                problem = answer_problem(outputs, examples, num_classes)
                if problem:
                    raise ServingCheckError(
                        f"signature {request.model_spec.signature_name!r}: {problem}"
                    )
        except ServingCheckError as error:
            raise ServingCheckError(str(error), command.name) from None
        finally:
            stop_child(server)
        return ServingCheckResult(
            signatures,
            time.monotonic() - available,
            available - start,
            command.name,
            started_ahead,
        )
