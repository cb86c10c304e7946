"""XLA, mixed precision and steps per execution per device, in one visible table.

TPUs only run XLA and are fastest in bfloat16; GPUs usually gain from XLA and
float16 (with loss scaling); on CPU, oneDNN beat XLA:CPU for these CNNs
(docs/benchmarks.md) and float32 is the only fast type. An accelerator spends
most of a small model's step waiting for the host to launch it, so TPUs and
GPUs run many steps per `tf.function` call (`steps_per_execution`); a CPU
is its own host and gains little. The configuration can override each choice;
combinations that cannot work fail here, by name.
"""

from __future__ import annotations

import dataclasses

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
    "cpu": TrainingPolicy(jit_compile=False, precision="float32", steps_per_execution=1),
}


def resolve_training_policy(
    device: Device, num_replicas: int, config: TrainerConfig
) -> TrainingPolicy:
    """Returns the device's defaults, with the configuration's overrides applied.

    Raises:
      ValueError: the override cannot work on this device, naming the field.
    """
    default = DEVICE_DEFAULTS[device]
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
