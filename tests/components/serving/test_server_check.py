"""The serving check: a fresh model server answers every signature right, or the push stops."""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import portpicker
import pytest
import tensorflow as tf

from tests.components.serving.served_models import (
    DIGITS,
    eval_examples,
    save_model,
    write_eval_split,
)
from tpu_pipeline.components.serving import server_check
from tpu_pipeline.components.serving.model_server import LISTENING, reported_port
from tpu_pipeline.components.serving.server_check import (
    MODEL_NAME,
    ServingCheckError,
    answer_problem,
    check_model,
    rest_body,
)
from tpu_pipeline.components.serving.warmup import (
    WARMUP_FILE,
    build_requests,
    signature_defs,
    write_warmup_requests,
)

MODEL_SERVER_MODULE = "tpu_pipeline.components.serving.model_server"
TIMEOUT = 120.0  # generous: the machine is shared; the timeout test sets its own


@pytest.fixture(autouse=True)
def _no_server_left_waiting():
    """A test that failed before its check took the server it started ahead stops it."""
    yield
    server_check.stop_server_ahead()


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
    published = signature_defs(save_model(tmp_path / "model"))
    (examples,) = build_requests(
        [b"\x00example-1", b"example-2"],
        DIGITS,
        {"serving_default": published["serving_default"]},
    )
    body = rest_body(examples)
    assert body["signature_name"] == "serving_default"
    assert body["inputs"] == {"examples": [{"b64": "AGV4YW1wbGUtMQ=="}, {"b64": "ZXhhbXBsZS0y"}]}
    (pixels,) = build_requests(
        eval_examples(tmp_path / "eval", 2), DIGITS, {"pixels": published["pixels"]}
    )
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
    assert message.endswith("(checked with model_server.py)")
    assert raised.value.server == "model_server.py"


def test_a_candidate_without_warmup_requests_fails_before_any_server_starts(tmp_path):
    model_dir = save_model(tmp_path / "model")
    with pytest.raises(ServingCheckError, match=f"{WARMUP_FILE} is missing"):
        check_model(model_dir, DIGITS.num_classes, TIMEOUT)


def test_tensorflow_model_server_on_path_serves_the_check(tmp_path, monkeypatch):
    # A stand-in with TF Serving's flags and REST API: the Python server, noting its argv.
    picked: list[int] = []
    pick = portpicker.pick_unused_port
    monkeypatch.setattr(portpicker, "pick_unused_port", lambda: picked.append(pick()) or picked[-1])
    calls = tmp_path / "calls.json"
    _on_path(
        monkeypatch,
        tmp_path / "bin",
        f"""
        import json, sys
        json.dump(sys.argv[1:], open({str(calls)!r}, "w"))
        from tpu_pipeline.components.serving.model_server import main
        main()
        """,
    )
    result = check_model(_candidate(tmp_path), DIGITS.num_classes, TIMEOUT)
    assert result.server == "tensorflow_model_server"
    assert result.signatures == ("serving_default", "images", "pixels")
    flags = dict(arg.lstrip("-").split("=", 1) for arg in json.loads(calls.read_text()))
    assert set(flags) == {"port", "rest_api_port", "model_name", "model_base_path"}
    assert flags["model_name"] == MODEL_NAME and flags["port"] != flags["rest_api_port"]
    # It takes its ports as flags: portpicker's, not a port probed and closed.
    assert sorted([int(flags["port"]), int(flags["rest_api_port"])]) == sorted(picked)
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


def test_the_python_server_binds_its_own_port_and_the_check_reads_which(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no tensorflow_model_server: the Python server
    started: list[list[str]] = []
    popen = subprocess.Popen

    def recording_popen(args, *rest, **kwargs):
        started.append(list(args))
        return popen(args, *rest, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", recording_popen)
    result = check_model(_candidate(tmp_path), DIGITS.num_classes, TIMEOUT)
    assert result.server == "model_server.py"
    (flags,) = [args[3:] for args in started if args[1:3] == ["-m", MODEL_SERVER_MODULE]]
    # Port 0: the kernel picks a free port as the server binds, so none can be taken first.
    assert "--rest_api_port=0" in flags and not any(f.startswith("--port=") for f in flags)


def test_a_port_is_read_only_from_a_whole_line():
    assert reported_port("loading\n") is None
    assert reported_port(f"loading\n{LISTENING}4") is None  # "45123" still being written
    assert reported_port(f"loading\n{LISTENING}45123\nmore\n") == 45123


def _gone(pid: int) -> bool:
    """Whether `pid` has exited (a zombie waiting for its new parent to reap it counts)."""
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_checks_server_dies_with_the_process_that_started_it_even_by_sigkill(tmp_path):
    """...and the check's copy of the candidate, left behind, goes with the next check."""
    # A tensorflow_model_server that notes its pid and never gets ready: the check waits.
    server_pid = tmp_path / "server.pid"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    binary = bin_dir / "tensorflow_model_server"
    binary.write_text(
        f"#!{sys.executable}\nimport os, pathlib, time\n"
        f"pathlib.Path({str(server_pid)!r}).write_text(str(os.getpid()))\ntime.sleep(600)\n"
    )
    binary.chmod(0o755)
    temp_dir = tmp_path / "tmp"  # the check's temporary folder
    temp_dir.mkdir()
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from tpu_pipeline.components.serving.server_check import check_model; "
            "check_model(sys.argv[1], 10, 600)",
            _candidate(tmp_path),
        ],
        env={
            **os.environ,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "TMPDIR": str(temp_dir),
        },
    )
    pid = None
    try:
        deadline = time.monotonic() + 120  # the parent imports TensorFlow first
        while not (server_pid.exists() and server_pid.read_text()) and parent.poll() is None:
            assert time.monotonic() < deadline, "the check never started its server"
            time.sleep(0.2)
        assert parent.poll() is None, "the check exited before it was killed"
        pid = int(server_pid.read_text())
        parent.send_signal(signal.SIGKILL)  # no finally, no atexit: only the kernel can act
        parent.wait()
        deadline = time.monotonic() + 5
        while not _gone(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _gone(pid), "the server outlived the process that started it"
        (left,) = temp_dir.iterdir()
        assert (left / MODEL_NAME / "1" / WARMUP_FILE).exists()
        assert server_check.WORK_DIRS.remove_abandoned(temp_dir) == [left]
        assert list(temp_dir.iterdir()) == []
    finally:
        parent.kill()
        if pid is not None and not _gone(pid):
            os.kill(pid, signal.SIGKILL)


def _without_model_server_binary(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-binaries"))  # the Python server, as here


def test_a_server_started_ahead_serves_the_next_check_and_only_that_one(tmp_path, monkeypatch):
    _without_model_server_binary(monkeypatch, tmp_path)
    server_check.start_server_ahead()
    waiting = server_check._ahead
    assert waiting is not None and waiting.poll() is None
    server_check.start_server_ahead()  # one waits already: no second process
    assert server_check._ahead is waiting
    first = check_model(_candidate(tmp_path / "a"), DIGITS.num_classes, TIMEOUT)
    assert first.started_ahead and first.server == "model_server.py"
    assert ", started ahead up in " in first.to_text()
    assert waiting.wait(timeout=30) is not None  # the check stopped it, as its own
    assert server_check._ahead is None
    second = check_model(_candidate(tmp_path / "b"), DIGITS.num_classes, TIMEOUT)
    assert not second.started_ahead and "started ahead" not in second.to_text()


def test_a_server_started_ahead_that_died_is_replaced_by_a_fresh_one(tmp_path, monkeypatch):
    _without_model_server_binary(monkeypatch, tmp_path)
    server_check.start_server_ahead()
    server_check._ahead.kill()
    server_check._ahead.wait()
    result = check_model(_candidate(tmp_path), DIGITS.num_classes, TIMEOUT)
    assert not result.started_ahead and result.server == "model_server.py"


def test_a_failed_load_in_a_server_started_ahead_is_quoted_from_its_log(tmp_path, monkeypatch):
    _without_model_server_binary(monkeypatch, tmp_path)
    server_check.start_server_ahead()
    with pytest.raises(ServingCheckError) as raised:
        check_model(_candidate(tmp_path, {"images": "raises"}), DIGITS.num_classes, TIMEOUT)
    message = str(raised.value)
    assert message.startswith("the model server could not load the model (exit 1)")
    assert "warmup request for signature 'images' failed" in message


def test_no_server_is_started_ahead_where_tensorflow_model_server_is_installed(
    tmp_path, monkeypatch
):
    _on_path(monkeypatch, tmp_path / "bin", "import sys; sys.exit(1)")
    server_check.start_server_ahead()
    assert server_check._ahead is None


def test_a_server_started_ahead_that_no_check_takes_ends_when_stopped_or_orphaned(
    tmp_path, monkeypatch
):
    _without_model_server_binary(monkeypatch, tmp_path)
    server_check.start_server_ahead()
    waiting = server_check._ahead
    server_check.stop_server_ahead()
    assert server_check._ahead is None and waiting.poll() is not None
    server_check.stop_server_ahead()  # nothing waits: nothing to do
    # Its input closing (the process that started it ended) ends it without loading anything.
    orphan = subprocess.run(
        [sys.executable, "-m", MODEL_SERVER_MODULE, "--flags_from_stdin"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert orphan.returncode == 0 and LISTENING not in orphan.stdout


def test_a_server_that_cannot_be_started_ahead_leaves_the_check_its_own_start(
    tmp_path, monkeypatch
):
    _without_model_server_binary(monkeypatch, tmp_path)

    def no_process_slot(*args, **kwargs):
        raise BlockingIOError(11, "Resource temporarily unavailable")

    with monkeypatch.context() as patched:
        patched.setattr(server_check, "start_child", no_process_slot)
        server_check.start_server_ahead()  # a lost head start, not an error
    assert server_check._ahead is None
    result = check_model(_candidate(tmp_path), DIGITS.num_classes, TIMEOUT)
    assert not result.started_ahead and result.server == "model_server.py"
