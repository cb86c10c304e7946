"""The serving check: a fresh model server answers every signature right, or the push stops."""

from __future__ import annotations

import json
import os
import pathlib
import re
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from components.serving.server_check import (
    MODEL_NAME,
    ServingCheckError,
    answer_problem,
    check_model,
    rest_body,
)
from components.serving.warmup import WARMUP_FILE, build_requests, write_warmup_requests
from tests.components.serving.served_models import (
    DIGITS,
    eval_examples,
    save_model,
    write_eval_split,
)

TIMEOUT = 120.0  # generous: the machine is shared; the timeout test sets its own


def _candidate(tmp_path: pathlib.Path, broken: dict[str, str] | None = None) -> str:
    model_dir = save_model(tmp_path / "model", broken)
    write_warmup_requests(model_dir, write_eval_split(tmp_path / "eval"), DIGITS)
    return model_dir


def _on_path(monkeypatch, folder: pathlib.Path, script: str) -> pathlib.Path:
    """Puts an executable `tensorflow_model_server` (a Python `script`) first on PATH."""
    folder.mkdir()
    binary = folder / "tensorflow_model_server"
    binary.write_text(f"#!{sys.executable}\n{textwrap.dedent(script)}")
    binary.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return binary


@pytest.mark.parametrize(
    "outputs, problem",
    [
        ([[0.25, 0.75]] * 3, None),
        ({"probabilities": [[1.0, 0.0]] * 3, "logits": [[1, 0]] * 3}, None),
        ([[0.25, 0.75]] * 2, r"answered shape \[2, 2\], expected \[3, 2\] \(2 class probabilities"),
        ([[1.0]] * 3, r"answered shape \[3, 1\], expected \[3, 2\]"),
        ({"logits": [[1, 0]] * 3}, r"answered \['logits'\], not 'probabilities'"),
        ([[2.0, -1.0]] * 3, "values outside 0..1"),
        ([[0.5, 0.2]] * 3, r"sum to 0.7000..0.7000, not 1"),
        ([[0.5, 0.5], [1.0]], "ragged"),
    ],
)
def test_an_answer_must_be_class_probabilities_for_every_example(outputs, problem):
    found = answer_problem(outputs, examples=3, num_classes=2)
    if problem is None:
        assert found is None
    else:
        assert found is not None and re.search(problem, found), found


def test_rest_bodies_carry_bytes_as_b64_and_numbers_as_lists(tmp_path):
    (examples,) = build_requests([b"\x00example-1", b"example-2"], DIGITS, ["serving_default"])
    body = rest_body(examples)
    assert body["signature_name"] == "serving_default"
    assert body["inputs"] == {"examples": [{"b64": "AGV4YW1wbGUtMQ=="}, {"b64": "ZXhhbXBsZS0y"}]}
    (pixels,) = build_requests(eval_examples(tmp_path, 2), DIGITS, ["pixels"])
    sent = rest_body(pixels)["inputs"]["pixels"]
    np.testing.assert_array_equal(sent, tf.make_ndarray(pixels.inputs["pixels"]))


def test_a_signature_that_fails_stops_the_load_and_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ServingCheckError) as raised:
        check_model(_candidate(tmp_path, {"images": "raises"}), DIGITS.num_classes, TIMEOUT)
    message = str(raised.value)
    assert message.startswith("the model server could not load the model (exit 1)")
    assert "warmup request for signature 'images' failed" in message
    assert "images is broken" in message


def test_a_candidate_without_warmup_requests_fails_before_any_server_starts(tmp_path):
    model_dir = save_model(tmp_path / "model")
    with pytest.raises(ServingCheckError, match=f"{WARMUP_FILE} is missing"):
        check_model(model_dir, DIGITS.num_classes, TIMEOUT)


def test_tensorflow_model_server_on_path_serves_the_check(tmp_path, monkeypatch):
    # A stand-in with TF Serving's flags and REST API: the Python server, noting its argv.
    calls = tmp_path / "calls.json"
    _on_path(
        monkeypatch,
        tmp_path / "bin",
        f"""
        import json, sys
        json.dump(sys.argv[1:], open({str(calls)!r}, "w"))
        from components.serving.model_server import main
        main()
        """,
    )
    result = check_model(_candidate(tmp_path), DIGITS.num_classes, TIMEOUT)
    assert result.server == "tensorflow_model_server"
    assert result.signatures == ("serving_default", "images", "pixels")
    flags = dict(arg.lstrip("-").split("=", 1) for arg in json.loads(calls.read_text()))
    assert set(flags) == {"port", "rest_api_port", "model_name", "model_base_path"}
    assert flags["model_name"] == MODEL_NAME and flags["port"] != flags["rest_api_port"]
    # A temporary copy in the layout a server reads, removed after the check.
    assert pathlib.Path(flags["model_base_path"]).name == MODEL_NAME
    assert not pathlib.Path(flags["model_base_path"]).exists()


def test_a_signature_that_does_not_answer_in_time_is_named(tmp_path, monkeypatch):
    # A server that is up at once and answers uniform probabilities, except for `pixels`.
    _on_path(
        monkeypatch,
        tmp_path / "bin",
        """
        import http.server, json, sys, time
        port = int(next(a for a in sys.argv if a.startswith("--rest_api_port=")).split("=")[1])

        class Handler(http.server.BaseHTTPRequestHandler):
            def reply(self, body):
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self.reply({"model_version_status": [{"version": "1", "state": "AVAILABLE"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if body["signature_name"] == "pixels":
                    time.sleep(60)
                (values,) = body["inputs"].values()
                self.reply({"outputs": [[0.1] * 10] * len(values)})

        http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
        """,
    )
    with pytest.raises(ServingCheckError, match=r"^signature 'pixels': no answer within 3 s"):
        check_model(_candidate(tmp_path), DIGITS.num_classes, timeout_seconds=3)
