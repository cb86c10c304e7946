"""XLA, mixed precision and steps per execution per device, in one visible table.

TPUs only run XLA and are fastest in bfloat16; GPUs usually gain from XLA and
float16 (with loss scaling); on CPU, oneDNN beat XLA:CPU for these CNNs
(docs/benchmarks.md). A CPU that computes bfloat16 natively (AVX512-BF16 or AMX, read
from its flags) trains in mixed_bfloat16: oneDNN then runs convolutions and matrix
products in bfloat16 at the same accuracy (docs/benchmarks.md, "CIFAR-10"); any other
CPU in float32, its only fast type. An accelerator spends
most of a small model's step waiting for the host to launch it, so TPUs and
GPUs run many steps per `tf.function` call (`steps_per_execution`); a CPU
is its own host and gains little. The configuration can override each choice;
combinations that cannot work fail here, by name.
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib

from tpu_pipeline.common.config import TrainerConfig
from tpu_pipeline.components.device.strategy import Device


@dataclasses.dataclass(frozen=True)
class TrainingPolicy:
    """How the model computes: XLA compilation, the Keras precision policy, steps per call."""

    jit_compile: bool
    precision: str
    steps_per_execution: int = 1


DEVICE_DEFAULTS: dict[str, TrainingPolicy] = {
    # 50: the Cloud TPU guide's choice; any value up to steps_per_epoch helps there.
    "tpu": TrainingPolicy(jit_compile=True, precision="mixed_bfloat16", steps_per_execution=50),
    "gpu": TrainingPolicy(jit_compile=True, precision="mixed_float16", steps_per_execution=10),
    # precision: float32, or mixed_bfloat16 on a CPU with bfloat16 arithmetic (`cpu_precision`).
    "cpu": TrainingPolicy(jit_compile=False, precision="float32", steps_per_execution=1),
}


# /proc/cpuinfo flags of CPUs with bfloat16 arithmetic (dot products into float32).
BFLOAT16_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


@functools.cache
def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> frozenset[str]:
    """The first CPU's feature flags (Linux); empty where the file is not there."""
    try:
        text = pathlib.Path(cpuinfo).read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


def cpu_precision(flags: frozenset[str] | None = None) -> str:
    """mixed_bfloat16 on a CPU with bfloat16 arithmetic, else float32."""
    flags = cpu_flags() if flags is None else flags
    return "mixed_bfloat16" if flags & BFLOAT16_CPU_FLAGS else "float32"


def resolve_training_policy(
    device: Device,
    num_replicas: int,
    config: TrainerConfig,
    flags: frozenset[str] | None = None,
) -> TrainingPolicy:
    """Returns the device's defaults, with the configuration's overrides applied.

    Args:
      device, num_replicas: what trains.
      config: the Trainer settings; set fields win over the device's defaults.
      flags: the CPU's feature flags (None: this machine's), for a CPU's precision.

    Raises:
      ValueError: the override cannot work on this device, naming the field.
    """
    default = DEVICE_DEFAULTS[device]
    if device == "cpu":
        default = dataclasses.replace(default, precision=cpu_precision(flags))
    jit_compile = default.jit_compile if config.jit_compile is None else config.jit_compile
    precision = config.precision or default.precision
    steps_per_execution = config.steps_per_execution or default.steps_per_execution
    if device == "cpu" and num_replicas > 1 and jit_compile:
        # XLA:CPU cannot reach variables mirrored on another logical CPU device.
        raise ValueError(
            "trainer.jit_compile=true does not work with MirroredStrategy over logical CPU "
            "devices; set trainer.jit_compile to false"
        )
    if device == "tpu" and precision == "mixed_float16":
        raise ValueError(
            "trainer.precision 'mixed_float16' is not supported on TPU; use 'mixed_bfloat16'"
        )
    return TrainingPolicy(jit_compile, precision, steps_per_execution)
