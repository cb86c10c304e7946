"""Strategy resolution: fast and safe without a TPU, loud when a configured TPU is silent."""

import socket
import time

import pytest
import tensorflow as tf

from tpu_pipeline.common.config import TrainerConfig
from tpu_pipeline.components.device import strategy
from tpu_pipeline.components.device.strategy import (
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


@pytest.fixture
def vfio_device(tmp_path, monkeypatch):
    """A VFIO device file, as TPU v5e VMs and GPU pass-through hosts both have."""
    (tmp_path / "vfio").mkdir()
    (tmp_path / "vfio" / "0").touch()
    monkeypatch.setattr(strategy, "TPU_DEVICE_GLOBS", (str(tmp_path / "vfio" / "[0-9]*"),))
    return str(tmp_path / "vfio" / "0")


def tpu_probe_refused(tpu, timeout_s):
    raise TPUUnavailableError(f"no TPU at {tpu}")


def fake_gpu(monkeypatch):
    """Makes TensorFlow report one GPU (the strategy is only built, never run)."""
    real = tf.config.list_logical_devices
    gpu = tf.config.LogicalDevice("/job:localhost/replica:0/task:0/device:GPU:0", "GPU")
    monkeypatch.setattr(
        tf.config, "list_logical_devices", lambda kind=None: [gpu] if kind == "GPU" else real(kind)
    )


def test_device_globs_are_read_at_call_time_so_tests_can_replace_them(vfio_device):
    assert find_tpu_signals(environ={}) == [vfio_device]


def test_a_gpu_wins_over_vfio_device_files(no_tpu_environment, vfio_device, monkeypatch):
    fake_gpu(monkeypatch)
    monkeypatch.setattr(strategy, "connect_tpu", tpu_probe_refused)
    choice = resolve_strategy(TrainerConfig())
    assert (choice.device, choice.description) == ("gpu", "one GPU")


def test_vfio_device_files_without_a_gpu_mean_a_tpu(no_tpu_environment, vfio_device, monkeypatch):
    monkeypatch.setattr(strategy, "connect_tpu", tpu_probe_refused)
    with pytest.raises(TPUUnavailableError, match=f"no TPU at local.*because of {vfio_device}"):
        resolve_strategy(TrainerConfig())


def test_a_tpu_named_in_the_environment_is_used_even_beside_a_gpu(
    no_tpu_environment, vfio_device, monkeypatch
):
    fake_gpu(monkeypatch)
    monkeypatch.setenv("TPU_NAME", "my-tpu")
    monkeypatch.setattr(strategy, "connect_tpu", tpu_probe_refused)
    with pytest.raises(TPUUnavailableError, match=r"because of \$TPU_NAME"):
        resolve_strategy(TrainerConfig())


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
