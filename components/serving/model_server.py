"""A minimal model server speaking TF Serving's REST API, for the serving check.

`python -m tpu_pipeline.components.serving.model_server` takes `tensorflow_model_server`'s own
flags (`--port`, `--rest_api_port`, `--model_name`, `--model_base_path`) and does what
it does for one model: loads the highest version under the base path with
`tf.saved_model.load`, replays the version's warmup requests (a file that does not
parse, or a request that fails, fails the load), and then answers
`GET /v1/models/NAME` (the version's state) and `POST /v1/models/NAME:predict`
(columnar `inputs`, binary values as `{"b64": ...}`) on 127.0.0.1. It is the
server the check uses where `tensorflow_model_server` is not installed, so the
candidate is loaded in a fresh process either way.

`--rest_api_port=0` binds a port the kernel picks; the server then prints the
port it got (`LISTENING`, read back by `reported_port`) once it answers there,
so the check never passes a port another process could take first.

`--flags_from_stdin` alone starts a server ahead of its model: it imports
TensorFlow, then waits for one JSON line on stdin, `{"flags": [...], "log": PATH}`,
sends its output to the log (a file the check made) and goes on as if started with
those flags. At the end of its input (the process that started it ended, or stopped
waiting for it) it exits without loading anything (`server_check.start_server_ahead`).
"""

from __future__ import annotations

import argparse
import base64
import http.server
import json
import os
import sys
from typing import Any

import numpy as np
import tensorflow as tf

from tpu_pipeline.components.serving.warmup import read_warmup_requests

# Printed on stdout, then the port, once the server listens.
LISTENING = "model_server: listening on 127.0.0.1:"
# The only flag of a server started ahead of its model: the rest come on stdin.
FLAGS_FROM_STDIN = "--flags_from_stdin"


def reported_port(output: str) -> int | None:
    """The port a server printed in `output` (its log so far), or None before it listens.

    Only a whole line counts, so a line still being written is never read as a shorter port.
    """
    for line in output.splitlines(keepends=True):
        if line.startswith(LISTENING) and line.endswith("\n"):
            return int(line[len(LISTENING) :])
    return None


def _decode(value: Any) -> Any:
    """JSON values to array values: `{"b64": ...}` objects become bytes."""
    if isinstance(value, dict):
        return base64.b64decode(value["b64"])
    if isinstance(value, list):
        return [_decode(item) for item in value]
    return value


class LoadedModel:
    """One loaded version: runs a signature on named numpy inputs."""

    def __init__(self, base_path: str):
        versions = [name for name in tf.io.gfile.listdir(base_path) if name.strip("/").isdigit()]
        if not versions:
            raise FileNotFoundError(f"no version folder under {base_path}")
        self.version = max(versions, key=lambda name: int(name.strip("/"))).strip("/")
        self.path = os.path.join(base_path, self.version)
        self._model = tf.saved_model.load(self.path)

    def predict(self, signature_name: str, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
        if signature_name not in self._model.signatures:
            raise KeyError(f'Serving signature name: "{signature_name}" not found in signature def')
        signature = self._model.signatures[signature_name]
        specs = signature.structured_input_signature[1]
        tensors = {key: tf.constant(value, specs[key].dtype) for key, value in inputs.items()}
        return {key: tensor.numpy() for key, tensor in signature(**tensors).items()}

    def replay_warmup(self) -> None:
        """Runs every warmup request, as TF Serving does before it serves the version."""
        for request in read_warmup_requests(self.path):
            name = request.model_spec.signature_name or "serving_default"
            inputs = {key: tf.make_ndarray(proto) for key, proto in request.inputs.items()}
            try:
                self.predict(name, inputs)
            except Exception as error:
                raise RuntimeError(
                    f"warmup request for signature {name!r} failed: {error}"
                ) from error


def _handler(model: LoadedModel, model_name: str) -> type[http.server.BaseHTTPRequestHandler]:
    status_path = f"/v1/models/{model_name}"

    class Handler(http.server.BaseHTTPRequestHandler):
        def _reply(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 (http.server's interface)
            if self.path.rstrip("/") != status_path:
                return self._reply(404, {"error": f"no model at {self.path}"})
            state = {"version": model.version, "state": "AVAILABLE", "status": {"error_code": "OK"}}
            self._reply(200, {"model_version_status": [state]})

        def do_POST(self) -> None:  # noqa: N802
            if self.path != f"{status_path}:predict":
                return self._reply(404, {"error": f"no model at {self.path}"})
            try:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                inputs = {key: _decode(value) for key, value in body["inputs"].items()}
                outputs = model.predict(body.get("signature_name", "serving_default"), inputs)
            except Exception as error:  # TF Serving answers 400 with the error's text
                return self._reply(400, {"error": f"{type(error).__name__}: {error}"})
            # Like TF Serving, a signature with one output answers its value unnamed.
            if len(outputs) == 1:
                return self._reply(200, {"outputs": next(iter(outputs.values())).tolist()})
            self._reply(200, {"outputs": {key: value.tolist() for key, value in outputs.items()}})

        def log_message(self, *args: Any) -> None:  # requests are not news
            pass

    return Handler


def _handed_flags() -> list[str] | None:
    """The flags a check hands a server started ahead of it, with its output sent to the log
    the check reads from now on; None at the end of input (no check will come)."""
    line = sys.stdin.readline()
    if not line:
        return None
    handed = json.loads(line)
    log = os.open(handed["log"], os.O_WRONLY | os.O_APPEND)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
        os.dup2(log, stream.fileno())
    os.close(log)
    return list(handed["flags"])


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv == [FLAGS_FROM_STDIN]:
        argv = _handed_flags()
        if argv is None:
            return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, help="gRPC port (accepted for parity; not served)")
    parser.add_argument("--rest_api_port", type=int, required=True, help="0: a free port")
    parser.add_argument("--model_name", required=True)
    parser.add_argument("--model_base_path", required=True)
    args = parser.parse_args(argv)
    try:
        model = LoadedModel(args.model_base_path)
        model.replay_warmup()
    except Exception as error:  # one line for the check to quote (TF's errors span many)
        sys.exit(f"model_server: {type(error).__name__}: {' '.join(str(error).split())[:500]}")
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", args.rest_api_port), _handler(model, args.model_name)
    )
    # Bound and listening: connections queue until serve_forever accepts them.
    print(f"{LISTENING}{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
