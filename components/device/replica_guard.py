"""Never train on part of the machine a job paid for: replicas and hosts must match the promise.

A multi-host TPU slice whose resolver saw only its own host still trains: on
4 of 16 chips, at a quarter of the speed, with a global batch a quarter of the
size the recipe was tuned for, and nothing fails. The same happens with GPUs
TensorFlow cannot see and with workers missing from TF_CONFIG. So once the
strategy exists, before the first step, what it spans is compared with what
the job's machine spec promises (`trainer.promised_devices`, set when the
pipeline is compiled for Vertex AI); any difference stops the Trainer with one
line naming both numbers and the likely cause.
"""

from __future__ import annotations

from tpu_pipeline.common.config import PromisedDevices


class ReplicaMismatchError(RuntimeError):
    """The strategy spans fewer (or more) replicas or hosts than the job's machines promise."""


def _likely_cause(device: str, hosts: int, promised: PromisedDevices) -> str:
    if device == "tpu" and hosts < promised.hosts:
        return (
            f"the TPU resolver reached {hosts} of the slice's {promised.hosts} hosts: it was "
            "given tpu 'local' (one host's chips) or no $TPU_NAME/$TPU_CONFIG naming the slice"
        )
    if device == "tpu":
        return (
            "the slice Vertex AI started is not vertex.trainer.machine_type x tpu_topology, "
            "or libtpu sees only part of it"
        )
    if hosts != promised.hosts:
        return (
            f"TF_CONFIG lists {hosts} workers but vertex.trainer.replica_count is {promised.hosts}"
        )
    if device == "gpu":
        return (
            "TensorFlow sees fewer GPUs than vertex.trainer.accelerator_count on some "
            "machine (CUDA libraries missing from the image, or another machine type)"
        )
    return f"the job runs on {device.upper()} but its machine spec promises another device"


def check_replicas(
    device: str, replicas: int, hosts: int, promised: PromisedDevices | None
) -> None:
    """Raises ReplicaMismatchError unless `replicas` on `hosts` are what `promised` says.

    Args:
      device: what the strategy runs on ("tpu", "gpu" or "cpu").
      replicas: the strategy's `num_replicas_in_sync`.
      hosts: machines the strategy spans (TPU hosts, or TF_CONFIG workers).
      promised: what the job's machine spec promises; None checks nothing (local runs).
    """
    if promised is None or (replicas, hosts) == (promised.replicas, promised.hosts):
        return
    raise ReplicaMismatchError(
        f"replica guard: {promised.machine} promises {promised.replicas} replicas on "
        f"{promised.hosts} host(s), but the {device.upper()} strategy has {replicas} on "
        f"{hosts}; likely cause: {_likely_cause(device, hosts, promised)}. Stopped before "
        "the first step"
    )
