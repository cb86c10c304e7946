"""Strategy resolution: fast and safe without a TPU, loud when a configured TPU is silent."""

import socket
import time

import pytest

from common.config import TrainerConfig
from components import strategy
from components.strategy import (
    NoAcceleratorError,
    TPUUnavailableError,
    find_tpu_signals,
    resolve_strategy,
)


@pytest.fixture
def no_tpu_environment(monkeypatch):
    for name in strategy.TPU_ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(strategy, "TPU_DEVICE_GLOBS", ())


@pytest.fixture
def silent_endpoint():
    """A loopback TCP server that accepts connections and never says a word."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield f"127.0.0.1:{server.getsockname()[1]}"
    server.close()


def test_no_signals_without_tpu_environment_or_devices():
    assert find_tpu_signals(environ={}, device_globs=()) == []


def test_tpu_signals_name_the_environment_variables_and_devices(tmp_path):
    (tmp_path / "accel0").touch()
    signals = find_tpu_signals(
        environ={"TPU_NAME": "my-tpu", "HOME": "/root"}, device_globs=(str(tmp_path / "accel*"),)
    )
    assert signals == ["$TPU_NAME", str(tmp_path / "accel0")]


def test_trainer_falls_back_to_cpu_when_no_tpu(no_tpu_environment):
    started = time.perf_counter()
    choice = resolve_strategy(TrainerConfig())
    assert choice.device == "cpu"
    assert choice.num_replicas == 1
    assert time.perf_counter() - started < 10  # no TPU probe: nothing to wait for


def test_asking_for_a_gpu_on_a_machine_without_one_fails_clearly(no_tpu_environment):
    with pytest.raises(NoAcceleratorError, match="accelerator is 'gpu' but TensorFlow sees no GPU"):
        resolve_strategy(TrainerConfig(accelerator="gpu"))


def test_silent_tpu_worker_on_loopback_fails_fast_instead_of_hanging(
    no_tpu_environment, monkeypatch, silent_endpoint
):
    monkeypatch.setenv("TPU_NAME", f"grpc://{silent_endpoint}")
    started = time.perf_counter()
    with pytest.raises(TPUUnavailableError) as error:
        resolve_strategy(TrainerConfig(tpu_connect_timeout_s=2))
    assert time.perf_counter() - started < 15
    message = str(error.value)
    assert f"grpc://{silent_endpoint}" in message
    assert "$TPU_NAME" in message
    assert "set trainer.accelerator to 'gpu' or 'cpu'" in message


def test_silent_metadata_server_fails_fast_instead_of_hanging(
    no_tpu_environment, monkeypatch, silent_endpoint
):
    # A TPU *name* makes the resolver ask the GCE metadata server, with no timeout of its own.
    monkeypatch.setenv("TPU_NAME", "my-tpu")
    monkeypatch.setenv("GCE_METADATA_IP", silent_endpoint)
    started = time.perf_counter()
    with pytest.raises(TPUUnavailableError, match="looking up TPU my-tpu: no answer within 2 s"):
        resolve_strategy(TrainerConfig(tpu_name="my-tpu", tpu_connect_timeout_s=2))
    assert time.perf_counter() - started < 15


def test_explicit_tpu_without_any_tpu_keeps_the_real_error(no_tpu_environment):
    with pytest.raises(TPUUnavailableError, match="Please provide a TPU Name") as error:
        resolve_strategy(TrainerConfig(accelerator="tpu", tpu_connect_timeout_s=5))
    assert isinstance(error.value.__cause__, ValueError)
