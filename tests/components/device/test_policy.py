"""XLA, precision and steps per call follow the device unless the configuration overrides them."""

import pytest

from tpu_pipeline.common.config import TrainerConfig
from tpu_pipeline.components.device.policy import TrainingPolicy, resolve_training_policy


@pytest.mark.parametrize(
    "device, expected",
    [
        ("tpu", TrainingPolicy(True, "mixed_bfloat16", steps_per_execution=50)),
        ("gpu", TrainingPolicy(True, "mixed_float16", steps_per_execution=10)),
        ("cpu", TrainingPolicy(False, "float32", steps_per_execution=1)),
    ],
)
def test_each_device_gets_its_defaults(device, expected):
    assert resolve_training_policy(device, 1, TrainerConfig()) == expected


def test_configuration_overrides_the_device_defaults():
    config = TrainerConfig(jit_compile=True, precision="mixed_bfloat16", steps_per_execution=4)
    assert resolve_training_policy("cpu", 1, config) == TrainingPolicy(True, "mixed_bfloat16", 4)
    assert resolve_training_policy("tpu", 8, config).steps_per_execution == 4
    assert resolve_training_policy("gpu", 2, TrainerConfig(jit_compile=False)).jit_compile is False


def test_xla_with_mirrored_logical_cpus_is_refused_by_field_name():
    with pytest.raises(ValueError, match="trainer.jit_compile"):
        resolve_training_policy("cpu", 2, TrainerConfig(jit_compile=True))
    assert resolve_training_policy("cpu", 2, TrainerConfig()).jit_compile is False


def test_float16_on_tpu_is_refused_with_the_alternative():
    with pytest.raises(ValueError, match="use 'mixed_bfloat16'"):
        resolve_training_policy("tpu", 8, TrainerConfig(precision="mixed_float16"))
