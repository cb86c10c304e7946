"""The `vertex:` config section rejects machine specs Vertex AI would reject, naming the field."""

from __future__ import annotations

import pytest

from tests.kubeflow.conftest import DEPLOYMENT_CONFIGS
from tpu_pipeline.common.config import ConfigError, load_config


def _trainer(**fields):
    overrides = {f"vertex.trainer.{key}": value for key, value in fields.items()}
    return load_config(str(DEPLOYMENT_CONFIGS["cpu"]), overrides).vertex.trainer


@pytest.mark.parametrize(
    ("fields", "device"),
    [
        ({}, "cpu"),
        (
            {"machine_type": "cloud-tpu", "accelerator_type": "TPU_V2", "accelerator_count": 8},
            "tpu",
        ),
        ({"machine_type": "ct5lp-hightpu-8t", "tpu_topology": "2x4"}, "tpu"),
        (
            {
                "machine_type": "a2-highgpu-2g",
                "accelerator_type": "NVIDIA_TESLA_A100",
                "accelerator_count": 2,
            },
            "gpu",
        ),
    ],
)
def test_machine_spec_decides_the_device_the_trainer_is_told(fields, device):
    assert _trainer(**fields).device == device


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"machine_type": "cloud-tpu"}, "'cloud-tpu' goes with accelerator_type TPU_V2 or TPU_V3"),
        (
            {"machine_type": "cloud-tpu", "accelerator_type": "TPU_V3", "accelerator_count": 32},
            "TPU_V3 on Vertex AI comes as 8 cores",
        ),
        ({"accelerator_type": "NVIDIA_TESLA_A100"}, "needs accelerator_count >= 1"),
        (
            {
                "machine_type": "ct5lp-hightpu-4t",
                "accelerator_type": "TPU_V3",
                "accelerator_count": 8,
            },
            "'cloud-tpu' goes with",
        ),
        ({"tpu_topology": "2x2"}, "tpu_topology applies to TPU machine types only"),
        ({"accelerator_count": 2}, "accelerator_count is set but accelerator_type is not"),
        (
            {"runs_on": "custom_job", "machine_type": "ct5lp-hightpu-4t", "replica_count": 4},
            "a TPU slice is one replica; for more hosts set a larger tpu_topology",
        ),
        (
            {"machine_type": "ct5lp-hightpu-4t", "tpu_topology": "1x2"},
            "tpu_topology 1x2 (2 chips) is not a whole number of ct5lp-hightpu-4t hosts",
        ),
        ({"replica_count": 2}, "replica_count > 1 needs runs_on: custom_job"),
        ({"spot": True}, "Spot capacity is for custom jobs"),
        (
            {
                "runs_on": "custom_job",
                "machine_type": "ct5lp-hightpu-4t",
                "tpu_topology": "4x4",
                "spot": True,
            },
            "Vertex AI does not offer Spot VMs for TPU Pods",
        ),
        (
            {"runs_on": "custom_job", "machine_type": "ct5lp-hightpu-4t"},
            "a TPU custom job runs in the TPU Trainer image",
        ),
    ],
)
def test_impossible_machine_specs_fail_naming_vertex_trainer(fields, message):
    with pytest.raises(ConfigError, match="vertex.trainer") as raised:
        _trainer(**fields)
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("fields", "hosts"),
    [
        ({}, 1),
        ({"runs_on": "custom_job", "replica_count": 3}, 3),
        ({"machine_type": "ct5lp-hightpu-4t", "tpu_topology": "2x2"}, 1),
        ({"machine_type": "ct5lp-hightpu-4t", "tpu_topology": "8x8"}, 16),
        ({"machine_type": "ct5lp-hightpu-8t", "tpu_topology": "2x4"}, 1),
    ],
)
def test_hosts_count_replicas_or_the_hosts_of_a_tpu_slice(fields, hosts):
    assert _trainer(**fields).hosts == hosts


def test_roots_must_be_gcs_uris_and_time_zone_known():
    with pytest.raises(ConfigError) as raised:
        load_config(
            str(DEPLOYMENT_CONFIGS["cpu"]),
            {"vertex.pipeline_root": "/tmp/root", "vertex.schedule.time_zone": "Mars/Base"},
        )
    assert "vertex.pipeline_root" in str(raised.value)
    assert "'Mars/Base' is not an IANA time zone name" in str(raised.value)
