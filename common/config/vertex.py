"""The `vertex:` section: only what a run on Vertex AI needs; local runs leave it unset."""

from __future__ import annotations

import math
import zoneinfo
from typing import Annotated, Literal

from pydantic import AwareDatetime, Field, model_validator

from tpu_pipeline.common.config.base import _Section
from tpu_pipeline.common.config.trainer import PromisedDevices

GcsUri = Annotated[str, Field(pattern=r"^gs://[a-z0-9][a-z0-9._-]+(/.*)?$")]
TPU_V5E_MACHINE_PREFIX = "ct5lp-hightpu-"  # TPU v5e VMs: the chips come with the machine type


class VertexTrainerConfig(_Section):
    """Where the Trainer runs on Vertex AI: in its pipeline step or as a custom training job.

    The machine fields are Vertex's MachineSpec: TPU v2-8 / v3-8 is machine type
    `cloud-tpu` with accelerator TPU_V2 / TPU_V3 x 8; TPU v5e is a machine type
    `ct5lp-hightpu-{1,4,8}t` (chips implied, optional `tpu_topology`); a GPU is
    an accelerator such as NVIDIA_TESLA_A100 with a count, on a matching machine.

    More than one machine: `replica_count` GPU or CPU machines train data-parallel
    (a chief and `replica_count - 1` workers, MultiWorkerMirroredStrategy); a TPU
    slice larger than one host is one replica with a larger `tpu_topology` (v5e:
    `ct5lp-hightpu-4t` hosts of 4 chips, e.g. 4x4 = 16 chips on 4 hosts).
    """

    runs_on: Literal["pipeline_step", "custom_job"] = "pipeline_step"
    machine_type: str = "n1-standard-8"
    accelerator_type: str | None = Field(default=None, pattern=r"^(TPU_V[23]|NVIDIA_[A-Z0-9_]+)$")
    accelerator_count: int = Field(default=0, ge=0)
    tpu_topology: str | None = Field(default=None, pattern=r"^\d+x\d+(x\d+)?$")
    replica_count: int = Field(
        default=1, ge=1, description="machines training data-parallel: a chief and N-1 workers"
    )
    image: str | None = Field(default=None, description="custom job image; default: pipeline_image")
    spot: bool = Field(
        default=False,
        description="custom job on Spot capacity (cheaper, can be preempted; the job restarts "
        "and the Trainer resumes from its last backed-up epoch)",
    )

    @model_validator(mode="after")
    def _consistent_machine(self) -> VertexTrainerConfig:
        accelerator, count = self.accelerator_type or "", self.accelerator_count
        if (self.machine_type == "cloud-tpu") != accelerator.startswith("TPU_"):
            raise ValueError("machine_type 'cloud-tpu' goes with accelerator_type TPU_V2 or TPU_V3")
        if accelerator.startswith("TPU_") and count != 8:
            raise ValueError(f"{accelerator} on Vertex AI comes as 8 cores: accelerator_count: 8")
        if accelerator.startswith("NVIDIA_") and count < 1:
            raise ValueError(f"{accelerator} needs accelerator_count >= 1")
        if not accelerator and count:
            raise ValueError("accelerator_count is set but accelerator_type is not")
        if self.machine_type.startswith(TPU_V5E_MACHINE_PREFIX) and accelerator:
            raise ValueError(f"{self.machine_type} has its TPU chips: leave accelerator_type unset")
        if self.tpu_topology and self.device != "tpu":
            raise ValueError("tpu_topology applies to TPU machine types only")
        if self.device == "tpu" and self.replica_count > 1:
            raise ValueError(
                "replica_count: a TPU slice is one replica; for more hosts set a larger "
                "tpu_topology (e.g. machine_type ct5lp-hightpu-4t, tpu_topology 4x4)"
            )
        if self.replica_count > 1 and self.runs_on != "custom_job":
            raise ValueError("replica_count > 1 needs runs_on: custom_job")
        if self.spot and self.runs_on != "custom_job":
            raise ValueError("spot: Spot capacity is for custom jobs: set runs_on: custom_job")
        if self.spot and self.device == "tpu" and self.hosts > 1:
            raise ValueError(
                "spot: Vertex AI does not offer Spot VMs for TPU Pods (multi-host slices); "
                "use a single-host tpu_topology or spot: false"
            )
        if self.runs_on == "custom_job" and self.device == "tpu" and not self.image:
            raise ValueError(
                "image: a TPU custom job runs in the TPU Trainer image (kubeflow/tpu.Dockerfile); "
                "the pipeline image has no TPU build of TensorFlow or libtpu"
            )
        if self.tpu_topology and self.chips_per_host:
            chips = self.topology_chips
            if chips % self.chips_per_host:
                raise ValueError(
                    f"tpu_topology {self.tpu_topology} ({chips} chips) is not a whole number "
                    f"of {self.machine_type} hosts ({self.chips_per_host} chips each)"
                )
        return self

    @property
    def chips_per_host(self) -> int:
        """TPU v5e chips per machine, the 4 of ct5lp-hightpu-4t; 0 for other machines."""
        if not self.machine_type.startswith(TPU_V5E_MACHINE_PREFIX):
            return 0
        return int(self.machine_type.removeprefix(TPU_V5E_MACHINE_PREFIX).removesuffix("t"))

    @property
    def topology_chips(self) -> int:
        """Chips in `tpu_topology`: the product of its dimensions (4x4 -> 16)."""
        return math.prod(int(side) for side in (self.tpu_topology or "1").split("x"))

    @property
    def hosts(self) -> int:
        """Machines the Trainer runs on: the replicas, or the hosts of a multi-host TPU slice."""
        if self.tpu_topology and self.chips_per_host:
            return self.topology_chips // self.chips_per_host
        return self.replica_count

    @property
    def promised_devices(self) -> PromisedDevices:
        """The replicas and hosts this machine spec promises the Trainer's strategy.

        TensorFlow makes one replica per TPU chip on v5e and per core on v2/v3
        (`cloud-tpu` comes as 8 cores), one per GPU, and one per CPU machine.
        """
        if self.device == "tpu" and self.chips_per_host:
            topology = self.tpu_topology or f"{self.chips_per_host} chips"
            replicas = self.topology_chips if self.tpu_topology else self.chips_per_host
            machine = f"{self.machine_type} x tpu_topology {topology}"
        elif self.device == "tpu":
            replicas = self.accelerator_count
            machine = f"{self.machine_type} with {self.accelerator_count} x {self.accelerator_type}"
        elif self.device == "gpu":
            replicas = self.accelerator_count * self.replica_count
            machine = (
                f"{self.accelerator_count} x {self.accelerator_type} on "
                f"{self.replica_count} x {self.machine_type}"
            )
        else:
            replicas = self.replica_count
            machine = f"{self.replica_count} x {self.machine_type}"
        return PromisedDevices(replicas=replicas, hosts=self.hosts, machine=machine)

    @property
    def device(self) -> Literal["tpu", "gpu", "cpu"]:
        """What the custom job trains on, from its machine spec."""
        if self.machine_type.startswith(TPU_V5E_MACHINE_PREFIX) or self.machine_type == "cloud-tpu":
            return "tpu"
        return "gpu" if self.accelerator_type else "cpu"


class DataflowConfig(_Section):
    """Runs the Beam components (statistics, Transform, Evaluator) on Dataflow."""

    temp_location: GcsUri
    max_num_workers: int = Field(default=4, ge=1)
    machine_type: str | None = None


class ModelRegistryConfig(_Section):
    """Uploads each pushed model as a new version of one Vertex AI Model Registry entry."""

    model_display_name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_ .-]{0,127}$")
    serving_image: str = "us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15:latest"
    endpoint_display_name: str | None = Field(
        default=None, description="deploy each new version to this endpoint (created if missing)"
    )
    endpoint_machine_type: str = "n1-standard-2"


class ScheduleConfig(_Section):
    """When Vertex AI reruns the pipeline (`tpu-pipeline schedule create`)."""

    display_name: str | None = Field(default=None, description="default: the pipeline name")
    cron: str = Field(default="0 3 * * 1", pattern=r"^\S+( \S+){4}$")
    time_zone: str = "UTC"
    max_concurrent_run_count: int = Field(default=1, ge=1)
    start_time: AwareDatetime | None = Field(default=None, description="e.g. 2027-01-01T00:00:00Z")
    end_time: AwareDatetime | None = None

    @model_validator(mode="after")
    def _known_time_zone(self) -> ScheduleConfig:
        if self.time_zone not in zoneinfo.available_timezones():
            raise ValueError(f"time_zone {self.time_zone!r} is not an IANA time zone name")
        return self


class VertexConfig(_Section):
    """Where and how the pipeline runs on Vertex AI Pipelines (see kubeflow/vertex-*.yaml)."""

    project: str = Field(pattern=r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
    region: str = "us-central1"
    pipeline_root: GcsUri
    data_root: GcsUri
    serving_dir: GcsUri
    pipeline_image: str = Field(description="image with TFX and this package (kubeflow/Dockerfile)")
    service_account: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    trainer: VertexTrainerConfig = VertexTrainerConfig()
    dataflow: DataflowConfig | None = None
    model_registry: ModelRegistryConfig | None = None
    schedule: ScheduleConfig = ScheduleConfig()

    @property
    def location(self) -> str:
        """`projects/<project>/locations/<region>`, the parent of what the API creates there."""
        return f"projects/{self.project}/locations/{self.region}"
