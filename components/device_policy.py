"""XLA and mixed-precision choices per device, in one visible table.

TPUs only run XLA and are fastest in bfloat16; GPUs usually gain from XLA and
float16 (with loss scaling); on CPU, oneDNN beat XLA:CPU for these CNNs
(docs/benchmarks.md) and float32 is the only fast type. The configuration can
override either choice; combinations that cannot work fail here, by name.
"""

from __future__ import annotations

import dataclasses

from common.config import TrainerConfig
from components.strategy import Device

# device -> (jit_compile, precision policy)
DEVICE_DEFAULTS: dict[str, tuple[bool, str]] = {
    "tpu": (True, "mixed_bfloat16"),
    "gpu": (True, "mixed_float16"),
    "cpu": (False, "float32"),
}


@dataclasses.dataclass(frozen=True)
class TrainingPolicy:
    """How the model computes: XLA compilation and the Keras precision policy."""

    jit_compile: bool
    precision: str


def resolve_training_policy(
    device: Device, num_replicas: int, config: TrainerConfig
) -> TrainingPolicy:
    """Returns the device's defaults, with the configuration's overrides applied.

    Raises:
      ValueError: the override cannot work on this device, naming the field.
    """
    default_jit, default_precision = DEVICE_DEFAULTS[device]
    jit_compile = default_jit if config.jit_compile is None else config.jit_compile
    precision = config.precision or default_precision
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
    return TrainingPolicy(jit_compile=jit_compile, precision=precision)
