"""XLA, precision and steps per call follow the device unless the configuration overrides them."""

import pytest

from tpu_pipeline.common.config import TrainerConfig
from tpu_pipeline.components.device.policy import (
    TrainingPolicy,
    cpu_flags,
    cpu_precision,
    resolve_training_policy,
)

PLAIN_CPU = frozenset({"sse2", "avx2", "avx512f"})
BFLOAT16_CPU = PLAIN_CPU | {"avx512_bf16"}


@pytest.mark.parametrize(
    "device, expected",
    [
        ("tpu", TrainingPolicy(True, "mixed_bfloat16", steps_per_execution=50)),
        ("gpu", TrainingPolicy(True, "mixed_float16", steps_per_execution=10)),
        ("cpu", TrainingPolicy(False, "float32", steps_per_execution=1)),
    ],
)
def test_each_device_gets_its_defaults(device, expected):
    assert resolve_training_policy(device, 1, TrainerConfig(), flags=PLAIN_CPU) == expected


@pytest.mark.parametrize("flag", ["avx512_bf16", "amx_bf16"])
def test_a_cpu_with_bfloat16_arithmetic_trains_in_mixed_bfloat16_unless_told_otherwise(flag):
    flags = PLAIN_CPU | {flag}
    assert resolve_training_policy("cpu", 1, TrainerConfig(), flags).precision == "mixed_bfloat16"
    told = TrainerConfig(precision="float32")
    assert resolve_training_policy("cpu", 1, told, flags).precision == "float32"
    # The flags speak for the CPU only: accelerators keep their own types.
    assert resolve_training_policy("gpu", 1, TrainerConfig(), flags).precision == "mixed_float16"


def test_cpu_flags_are_read_from_cpuinfo_and_a_missing_file_means_none(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse2 avx512f avx512_bf16\n\n"
        "processor\t: 1\nflags\t\t: fpu sse2 avx512f avx512_bf16\n"
    )
    assert cpu_flags(str(cpuinfo)) == {"fpu", "sse2", "avx512f", "avx512_bf16"}
    assert cpu_precision(cpu_flags(str(cpuinfo))) == "mixed_bfloat16"
    assert cpu_flags(str(tmp_path / "missing")) == frozenset()
    assert cpu_precision(frozenset()) == "float32"


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
