"""Without credentials or network, real Vertex AI calls fail in seconds with one clear line."""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys
import time

import pytest

from tests.kubeflow.conftest import own_project_config
from tpu_pipeline.common.config import REPO_ROOT
from tpu_pipeline.common.vertex_api import VertexUnreachableError, check_reachable, first_hop

CLI = [sys.executable, "-m", "tpu_pipeline.cli.main"]


def _offline_env(tmp_path: pathlib.Path, **extra: str) -> dict[str, str]:
    """No ADC anywhere: a fresh HOME and gcloud config, no key file variable."""
    dropped = {"GOOGLE_APPLICATION_CREDENTIALS", "grpc_proxy", "https_proxy", "HTTPS_PROXY"}
    env = {k: v for k, v in os.environ.items() if k not in dropped | {"http_proxy", "HTTP_PROXY"}}
    env.update(HOME=str(tmp_path), CLOUDSDK_CONFIG=str(tmp_path / "gcloud"), **extra)
    return env


def _submit(
    env: dict[str, str], tmp_path: pathlib.Path
) -> tuple[subprocess.CompletedProcess, float]:
    # The shipped config with a project set: the placeholder is refused before any call.
    argv = [*CLI, "submit", "--config", str(own_project_config(tmp_path))]
    started = time.monotonic()
    result = subprocess.run(
        [*argv, "--pipeline-json", str(tmp_path / "never-read.json")],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return result, time.monotonic() - started


def test_submit_without_credentials_fails_fast_saying_how_to_log_in(tmp_path):
    result, seconds = _submit(_offline_env(tmp_path), tmp_path)
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()[-1:]
    assert "no Google Cloud credentials" in line
    assert "gcloud auth application-default login" in line
    # Bounded well below the SDK's own ~120 s of retries; imports are included, and
    # the check's own bound is asserted in isolation below.
    assert seconds < 60


def test_submit_with_credentials_but_no_network_fails_fast_naming_the_endpoint(tmp_path):
    key_file = tmp_path / "adc.json"
    # An authorized-user file loads without network; only calls would need it.
    key_file.write_text(
        json.dumps(
            {
                "type": "authorized_user",
                "client_id": "x",
                "client_secret": "y",
                "refresh_token": "z",
            }
        )
    )
    env = _offline_env(tmp_path, GOOGLE_APPLICATION_CREDENTIALS=str(key_file))
    result, seconds = _submit(env, tmp_path)
    assert result.returncode == 1
    # Refused or unresolvable at once here; a resolver that hangs hits the 5 s bound instead.
    assert "us-central1-aiplatform.googleapis.com:443" in result.stderr
    assert seconds < 60


def test_endpoint_check_gives_up_on_a_silent_network_within_its_timeout(monkeypatch):
    def hang(*args, **kwargs):
        time.sleep(30)

    monkeypatch.setattr(socket, "create_connection", hang)
    started = time.monotonic()
    with pytest.raises(VertexUnreachableError, match="no answer within 0.5 s"):
        check_reachable("us-central1", timeout_s=0.5)
    assert time.monotonic() - started < 2


def test_reachability_is_checked_through_the_proxy_grpc_would_use():
    assert first_hop("europe-west4", {}) == ("europe-west4-aiplatform.googleapis.com", 443)
    proxied = {"https_proxy": "http://proxy.corp:3128"}
    assert first_hop("europe-west4", proxied) == ("proxy.corp", 3128)
