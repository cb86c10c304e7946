"""Chooses the distribution strategy: TPU, else GPUs, else CPU.

Asking TensorFlow "is there a TPU?" is not safe: with `TPU_NAME` set,
`TPUClusterResolver` queries the GCE metadata server with no timeout, and
connecting to a silent `grpc://` address blocks for minutes. So we first look
for cheap evidence of a TPU (environment variables, TPU device files), and only
when there is some do we contact it, under a timeout. When evidence exists but
the TPU does not answer, that is an error, not a reason to train on a CPU for
hours: the user meant to use a TPU.

A slice of several hosts is trained from one client, as TensorFlow's multi-host
path works: the resolver is given the slice's name (`$TPU_NAME`, or
`$TPU_CONFIG` through the Cloud TPU API; `tpu_cluster_resolver.py`), finds every
host's TPU worker, the client connects to them all and initialises the TPU
system once, and one TPUStrategy spans every chip. `tpu="local"` there would
see only the client's own host (tensorflow/tensorflow#56760), so it is kept for
single-host TPU VMs. Whatever was reached is checked against what the job's
machines promise (`replica_guard.py`) before anything trains.
"""

from __future__ import annotations

import dataclasses
import glob
import os
from collections.abc import Mapping
from typing import Literal

import tensorflow as tf
from absl import logging

from tpu_pipeline.common.config import TrainerConfig
from tpu_pipeline.common.timeouts import call_with_timeout, wait_for_grpc_endpoint
from tpu_pipeline.components.device.multi_worker import connect_workers, multi_worker_cluster
from tpu_pipeline.components.device.replica_guard import check_replicas

Device = Literal["tpu", "gpu", "cpu"]

# Set by Cloud TPU VMs, GKE, Colab and Vertex AI when a TPU is attached.
TPU_ENV_VARS = (
    "TPU_NAME",
    "TPU_CONFIG",
    "TPU_ACCELERATOR_TYPE",
    "TPU_WORKER_HOSTNAMES",
    "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS",
    "COLAB_TPU_ADDR",
)
# What TensorFlow's Cloud TPU client reads to find a slice's hosts when given no TPU name.
SLICE_ENV_VARS = ("KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS", "TPU_NAME", "TPU_CONFIG")
# TPU VMs expose their chips as /dev/accel* (v2-v4) or VFIO devices (v5e and later).
TPU_DEVICE_GLOBS = ("/dev/accel*", "/dev/vfio/[0-9]*")


class TPUUnavailableError(RuntimeError):
    """A TPU was configured or signalled, but could not be reached."""


class NoAcceleratorError(RuntimeError):
    """The configuration asks for an accelerator this machine does not have."""


@dataclasses.dataclass(frozen=True)
class StrategyChoice:
    """The strategy the Trainer uses, and what it runs on."""

    strategy: tf.distribute.Strategy
    device: Device
    num_replicas: int
    description: str
    num_workers: int = 1  # training processes (TF_CONFIG tasks); a TPU slice has one client
    is_chief: bool = True  # only the chief writes the model and logs
    hosts: int = 1  # machines the strategy spans: TPU hosts, or the workers


def find_tpu_signals(
    environ: Mapping[str, str] | None = None,
    device_globs: tuple[str, ...] | None = None,
) -> list[str]:
    """Lists the cheap evidence that a TPU is attached (about a millisecond).

    Defaults are read at call time, not captured at import, so the module's
    `TPU_DEVICE_GLOBS` (and a test's replacement of it) is what is looked at.
    """
    environ = os.environ if environ is None else environ
    device_globs = TPU_DEVICE_GLOBS if device_globs is None else device_globs
    signals = [f"${name}" for name in TPU_ENV_VARS if environ.get(name)]
    signals += sorted(path for pattern in device_globs for path in glob.glob(pattern))
    return signals


def connect_tpu(tpu: str | None, timeout_s: float) -> StrategyChoice:
    """Connects to the TPU and returns a TPUStrategy over all its cores.

    Args:
      tpu: a TPU name, a `grpc://host:port` address, `"local"` for a TPU VM, or
        None to let TensorFlow read `TPU_NAME` and friends.
      timeout_s: limit for each network step that can hang.
    """
    resolver_class = tf.distribute.cluster_resolver.TPUClusterResolver
    what = f"looking up TPU {tpu or '$TPU_NAME'}"
    try:
        resolver = call_with_timeout(
            lambda: resolver_class(tpu=tpu), timeout_s, what, on_timeout=TPUUnavailableError
        )
    except TPUUnavailableError:
        raise
    except Exception as error:  # the resolver's own error, e.g. no TPU name: keep it chained
        raise TPUUnavailableError(f"{what}: {type(error).__name__}: {error}") from error
    master = resolver.master()
    if master.startswith("grpc://"):
        try:
            wait_for_grpc_endpoint(master.removeprefix("grpc://"), timeout_s)
        except TimeoutError as error:
            raise TPUUnavailableError(f"TPU worker {error}") from None
    if tpu != "local":
        tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)  # once, from this one client
    strategy = tf.distribute.TPUStrategy(resolver)
    replicas, hosts = strategy.num_replicas_in_sync, strategy.extended.num_hosts
    where = master or "local TPU"
    return StrategyChoice(
        strategy, "tpu", replicas, f"TPUStrategy on {where} ({hosts} hosts)", hosts=hosts
    )


def _is_device_file(signal: str) -> bool:
    return signal.startswith("/")  # the others are $ENV_VARS and trainer.tpu_name


def _only_device_files(signals: list[str]) -> bool:
    return bool(signals) and all(_is_device_file(signal) for signal in signals)


def tpu_resolver_address(
    config: TrainerConfig, signals: list[str], environ: Mapping[str, str] | None = None
) -> str | None:
    """What `TPUClusterResolver(tpu=...)` is given: a name, "local", or None (read the env).

    A slice of several hosts (`trainer.promised_devices.hosts` > 1) is never
    "local": the resolver must find the other hosts through `$TPU_NAME` or
    `$TPU_CONFIG`, and without either it fails here instead of training on one host.

    Raises:
      TPUUnavailableError: a multi-host slice with nothing naming it.
    """
    environ = os.environ if environ is None else environ
    if config.tpu_name:
        return config.tpu_name
    hosts = config.promised_devices.hosts if config.promised_devices else 1
    if hosts > 1:
        if not any(environ.get(name) for name in SLICE_ENV_VARS):
            raise TPUUnavailableError(
                f"a {hosts}-host TPU slice needs ${' or $'.join(SLICE_ENV_VARS)} to find its "
                "other hosts and none is set; tpu 'local' would see this host's chips only"
            )
        return None
    if any(_is_device_file(signal) for signal in signals) and not environ.get("TPU_NAME"):
        return "local"
    return None


def resolve_strategy(config: TrainerConfig) -> StrategyChoice:
    """Picks TPU, else several workers (TF_CONFIG), else >= 2 GPUs, one GPU, or the CPU.

    Several logical CPU devices (configured before TensorFlow initialises) get
    a MirroredStrategy too: that is how the multi-replica code path is tested
    on machines without accelerators.

    Raises:
      TPUUnavailableError: a TPU is configured or signalled but does not answer.
      NoAcceleratorError: `accelerator` asks for a GPU and there is none.
      ReplicaMismatchError: the strategy spans other replicas or hosts than promised.
    """
    choice = _connect(config)
    check_replicas(choice.device, choice.num_replicas, choice.hosts, config.promised_devices)
    return choice


def _connect(config: TrainerConfig) -> StrategyChoice:
    """The strategy `resolve_strategy` returns, before the replica guard looks at it."""
    wanted = config.accelerator
    if wanted in ("auto", "tpu"):
        signals = find_tpu_signals()
        if config.tpu_name:
            signals.append("trainer.tpu_name")
        # VFIO devices also pass GPUs (and other PCI devices) through to VMs:
        # device files alone do not outweigh a GPU TensorFlow can use.
        gpu_seen = _only_device_files(signals) and tf.config.list_logical_devices("GPU")
        if wanted == "auto" and gpu_seen:
            logging.info("Not taking %s for a TPU: TensorFlow sees a GPU", ", ".join(signals))
            signals = []
        if signals or wanted == "tpu":
            logging.info("TPU evidence: %s", ", ".join(signals) or "trainer.accelerator=tpu")
            try:
                address = tpu_resolver_address(config, signals)
                return connect_tpu(address, config.tpu_connect_timeout_s)
            except TPUUnavailableError as error:
                raise TPUUnavailableError(
                    f"{error}. TPU expected because of {', '.join(signals) or 'accelerator=tpu'}; "
                    "set trainer.accelerator to 'gpu' or 'cpu' to train without it."
                ) from error.__cause__
    cluster = multi_worker_cluster()
    if cluster:  # before anything else starts TensorFlow's runtime
        # MultiWorkerMirroredStrategy over the TF_CONFIG cluster, on each worker's GPUs or CPU.
        strategy, workers, is_chief = connect_workers(
            cluster, config.worker_join_timeout_s, config.worker_heartbeat_timeout_s
        )
        device: Device = "gpu" if tf.config.list_physical_devices("GPU") else "cpu"
        if wanted == "gpu" and device != "gpu":
            raise NoAcceleratorError("trainer.accelerator is 'gpu' but this worker has no GPU")
        replicas = strategy.num_replicas_in_sync
        description = (
            f"MultiWorkerMirroredStrategy on {workers} workers "
            f"({replicas} {device.upper()} replicas)"
        )
        return StrategyChoice(strategy, device, replicas, description, workers, is_chief, workers)
    if wanted in ("auto", "gpu"):
        gpus = tf.config.list_logical_devices("GPU")
        if len(gpus) >= 2:
            names = [gpu.name for gpu in gpus]
            return StrategyChoice(
                tf.distribute.MirroredStrategy(names),
                "gpu",
                len(names),
                f"MirroredStrategy on {len(names)} GPUs",
            )
        if len(gpus) == 1:
            return StrategyChoice(
                tf.distribute.OneDeviceStrategy(gpus[0].name), "gpu", 1, "one GPU"
            )
        if wanted == "gpu":
            raise NoAcceleratorError("trainer.accelerator is 'gpu' but TensorFlow sees no GPU")
    cpus = tf.config.list_logical_devices("CPU")
    if len(cpus) >= 2:
        names = [cpu.name for cpu in cpus]
        return StrategyChoice(
            tf.distribute.MirroredStrategy(names),
            "cpu",
            len(names),
            f"MirroredStrategy on {len(names)} CPU devices",
        )
    return StrategyChoice(tf.distribute.get_strategy(), "cpu", 1, "CPU (default strategy)")
