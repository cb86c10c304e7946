"""A TPU slice without a TPU: what each host sees is simulated, TensorFlow's TPU calls stood in for.

The stand-in resolver answers the way TensorFlow's does (`tpu_cluster_resolver.py`):
`tpu="local"` sees the chips of its own host; no name with `$TPU_CONFIG` (or
`$TPU_NAME`) set resolves the whole slice. The guard tests feed it numbers
directly: what matters is that a short slice stops before anything trains.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import tensorflow as tf

from tpu_pipeline.common.config import PromisedDevices, TrainerConfig
from tpu_pipeline.components.device import strategy
from tpu_pipeline.components.device.replica_guard import ReplicaMismatchError, check_replicas
from tpu_pipeline.components.device.strategy import (
    TPUUnavailableError,
    resolve_strategy,
    tpu_resolver_address,
)

V5E_4X4 = PromisedDevices(replicas=16, hosts=4, machine="ct5lp-hightpu-4t x tpu_topology 4x4")
V5E_2X2 = PromisedDevices(replicas=4, hosts=1, machine="ct5lp-hightpu-4t x tpu_topology 2x2")
# What a multi-host TPU worker may carry: TensorFlow's Cloud TPU client reads this JSON.
SLICE_TPU_CONFIG = json.dumps({"tpu_node_name": "slice-4x4", "project": "p", "zone": "us-west4-a"})
CHIPS_PER_HOST, SLICE_HOSTS = 4, 4


class SliceResolver:
    """TPUClusterResolver stand-in: one host's 4 chips for "local", the 4-host slice otherwise."""

    made: list[SliceResolver] = []

    def __init__(self, tpu=None):
        if tpu is None and not any(strategy.os.environ.get(v) for v in strategy.SLICE_ENV_VARS):
            raise ValueError("Please provide a TPU Name to connect to.")
        self.tpu = tpu
        self.hosts = 1 if tpu == "local" else SLICE_HOSTS
        SliceResolver.made.append(self)

    def master(self):
        return "" if self.tpu == "local" else "grpc://10.0.0.2:8470"


class SliceStrategy:
    """TPUStrategy stand-in: one replica per chip the resolver reached."""

    def __init__(self, resolver):
        self.num_replicas_in_sync = resolver.hosts * CHIPS_PER_HOST
        self.extended = SimpleNamespace(num_hosts=resolver.hosts)


@pytest.fixture
def tpu_host(tmp_path, monkeypatch):
    """A TPU VM host: a VFIO device file, no TPU variables, TensorFlow's TPU calls recorded."""
    for name in strategy.TPU_ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "vfio").mkdir()
    (tmp_path / "vfio" / "0").touch()
    monkeypatch.setattr(strategy, "TPU_DEVICE_GLOBS", (str(tmp_path / "vfio" / "[0-9]*"),))
    calls = {"connect": [], "initialize": []}
    SliceResolver.made = []
    monkeypatch.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver", SliceResolver)
    monkeypatch.setattr(strategy, "wait_for_grpc_endpoint", lambda address, timeout_s: None)
    monkeypatch.setattr(tf.config, "experimental_connect_to_cluster", calls["connect"].append)
    monkeypatch.setattr(tf.tpu.experimental, "initialize_tpu_system", calls["initialize"].append)
    monkeypatch.setattr(tf.distribute, "TPUStrategy", SliceStrategy)
    return calls


def test_single_host_tpu_vm_resolves_local_and_initialises_once(tpu_host):
    choice = resolve_strategy(
        TrainerConfig(accelerator="tpu", tpu_name="local", promised_devices=V5E_2X2)
    )
    (resolver,) = SliceResolver.made
    assert resolver.tpu == "local"
    assert tpu_host == {"connect": [], "initialize": [resolver]}  # local: no cluster to join
    assert (choice.num_replicas, choice.hosts, choice.num_workers) == (4, 1, 1)


def test_multi_host_slice_resolves_through_tpu_config_and_spans_every_host(tpu_host, monkeypatch):
    monkeypatch.setenv("TPU_CONFIG", SLICE_TPU_CONFIG)
    choice = resolve_strategy(TrainerConfig(accelerator="tpu", promised_devices=V5E_4X4))
    (resolver,) = SliceResolver.made
    assert resolver.tpu is None  # TensorFlow's client reads $TPU_CONFIG, never "local"
    # One client connects to every host's worker and initialises the TPU system once.
    assert tpu_host == {"connect": [resolver], "initialize": [resolver]}
    assert (choice.num_replicas, choice.hosts) == (16, 4)
    assert choice.num_workers == 1  # one client process, not a TF_CONFIG cluster
    assert "(4 hosts)" in choice.description


def test_tensorflows_own_tpu_client_names_the_slice_from_tpu_config(monkeypatch):
    from tensorflow.python.tpu.client import client

    for name in strategy.SLICE_ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TPU_CONFIG", SLICE_TPU_CONFIG)
    # Project and zone come from TPU_CONFIG, so nothing asks the metadata server here.
    assert client.Client(tpu=None).name() == "slice-4x4"


def test_multi_host_slice_is_never_resolved_as_local_even_with_tpu_device_files(monkeypatch):
    monkeypatch.setenv("TPU_NAME", "slice-4x4")
    config = TrainerConfig(accelerator="tpu", promised_devices=V5E_4X4)
    assert tpu_resolver_address(config, ["/dev/vfio/0"]) is None
    single = TrainerConfig(accelerator="tpu", promised_devices=V5E_2X2)
    assert tpu_resolver_address(single, ["/dev/vfio/0"], environ={}) == "local"


def test_multi_host_slice_with_nothing_naming_it_fails_naming_the_variables(tpu_host):
    with pytest.raises(TPUUnavailableError, match=r"4-host TPU slice needs \$KUBE_GOOGLE") as error:
        resolve_strategy(TrainerConfig(accelerator="tpu", promised_devices=V5E_4X4))
    assert "$TPU_CONFIG" in str(error.value) and SliceResolver.made == []


def test_replica_guard_stops_a_slice_that_reached_4_of_16_chips(tpu_host):
    # What `tpu: local` did on a 4x4 slice: this host's 4 chips, and training went on.
    config = TrainerConfig(accelerator="tpu", tpu_name="local", promised_devices=V5E_4X4)
    with pytest.raises(ReplicaMismatchError) as error:
        resolve_strategy(config)
    message = str(error.value)
    assert "\n" not in message
    assert "promises 16 replicas on 4 host(s), but the TPU strategy has 4 on 1" in message
    assert "ct5lp-hightpu-4t x tpu_topology 4x4" in message
    assert "reached 1 of the slice's 4 hosts" in message and "tpu 'local'" in message


@pytest.mark.parametrize(
    ("device", "replicas", "hosts", "promised", "cause"),
    [
        ("gpu", 1, 1, PromisedDevices(replicas=2, machine="2 x A100"), "fewer GPUs than"),
        ("gpu", 6, 3, PromisedDevices(replicas=8, hosts=4, machine="2 x A100 on 4"), "TF_CONFIG"),
        ("cpu", 3, 3, PromisedDevices(replicas=4, hosts=4, machine="4 x n1"), "lists 3 workers"),
        ("tpu", 8, 4, V5E_4X4, "not vertex.trainer.machine_type x tpu_topology"),
    ],
    ids=["gpu-missing", "worker-missing", "cpu-worker-missing", "tpu-short-slice"],
)
def test_replica_guard_names_both_numbers_and_the_likely_cause(
    device, replicas, hosts, promised, cause
):
    with pytest.raises(ReplicaMismatchError, match=cause) as error:
        check_replicas(device, replicas, hosts, promised)
    assert f"promises {promised.replicas} replicas" in str(error.value)
    assert f"has {replicas} on {hosts}" in str(error.value)


def test_replica_guard_passes_what_was_promised_and_local_runs_without_a_promise():
    check_replicas("tpu", 16, 4, V5E_4X4)
    check_replicas("cpu", 2, 1, None)
