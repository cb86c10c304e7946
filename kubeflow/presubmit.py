"""What a Vertex AI run will meet, checked here before anything is compiled or sent.

A Vertex AI run fails minutes after it is submitted, in a console far from the
command that caused it: the shipped placeholder project does not exist, a cron
Vertex AI cannot read is refused by the API (or, worse, accepted as something else),
a schema file the image does not hold fails the first step that reads it. Each is
said here in one line, and refused (ConfigError, exit 2). A choice that runs but
trains poorly (a small from-scratch network at ImageNet's size) is a one-line
warning: the user may mean it.
"""

from __future__ import annotations

import pathlib
import re
from typing import Any

from tpu_pipeline.common.config import REPO_ROOT, ConfigError, PipelineConfig, require_vertex
from tpu_pipeline.components.imagenet_files import IMAGENET_FILES
from tpu_pipeline.kubeflow.cluster_config import CONTAINER_SOURCE_DIR, container_schema_file
from tpu_pipeline.pipeline.wiring.recipe import SCRATCH_SIDES

# What kubeflow/vertex-*.yaml say until the user names their own project.
PLACEHOLDER_PROJECT = "your-gcp-project"
PIPELINE_DOCKERFILE = REPO_ROOT / "kubeflow" / "Dockerfile"

# Unix cron, as Vertex AI schedules read it: minute hour day-of-month month day-of-week.
_NAMES = "JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC|SUN|MON|TUE|WED|THU|FRI|SAT"
_VALUE = rf"(\d+|{_NAMES})"
_ITEM = re.compile(rf"^(\*|{_VALUE}(-{_VALUE})?)(/\d+)?$", re.IGNORECASE)
_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
_FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")


def check_for_vertex(config: PipelineConfig, command: str, cron: str | None = None) -> list[str]:
    """Refuses what a Vertex AI run would fail on; returns one warning line per poor choice.

    Args:
      config: the configuration `compile`, `submit` or `schedule` read.
      command: which of them: the image's schema and the model's size matter when
        compiling, the project always.
      cron: the schedule's cron, when a schedule is created or updated.

    Raises:
      ConfigError: one line naming the field, the value and what to do.
    """
    vertex = require_vertex(config)
    _refuse_placeholder(vertex.model_dump(mode="json"))
    if cron is not None:
        check_cron(cron)
    if command != "compile":
        return []
    check_schema_in_image(config)
    warning = model_size_warning(config)
    return [warning] if warning else []


def _refuse_placeholder(vertex: dict[str, Any], prefix: str = "vertex") -> None:
    """Refuses `vertex.project` (or any other field) still naming the placeholder project."""
    for field in sorted(vertex, key=lambda name: name != "project"):  # the project first
        value = vertex[field]
        if isinstance(value, dict):
            _refuse_placeholder(value, f"{prefix}.{field}")
        elif PLACEHOLDER_PROJECT in str(value):
            raise ConfigError(
                f"{prefix}.{field}: {value} still names the placeholder project "
                f"{PLACEHOLDER_PROJECT}; replace it with your Google Cloud project everywhere "
                "in the configuration (docs/vertex/deploy.md)"
            )


def check_cron(cron: str) -> None:
    """Refuses a cron Vertex AI would not read as the user means it.

    Raises:
      ConfigError: not five unix-cron fields, or a field out of its range.
    """
    fields = cron.split()
    problem = None
    if len(fields) != len(_FIELDS):
        problem = f"{len(fields)} field(s), not 5"
    for name, field, (low, high) in zip(_FIELDS, fields, _RANGES, strict=False):
        if problem:
            break
        for item in field.split(","):
            numbers = [int(n) for n in re.findall(r"\d+", item.split("/")[0])]
            if not _ITEM.match(item) or any(not low <= n <= high for n in numbers):
                problem = f"{name} {item!r} is not a value, range or step from {low} to {high}"
                break
    if problem:
        raise ConfigError(
            f"cron {cron!r}: {problem}; give minute hour day-of-month month day-of-week, "
            "e.g. '0 3 * * 1' (Mondays 03:00 in vertex.schedule.time_zone)"
        )


def image_folders(dockerfile: pathlib.Path = PIPELINE_DOCKERFILE) -> list[str]:
    """The repository folders the pipeline image copies to CONTAINER_SOURCE_DIR (its COPY lines)."""
    folders = []
    for line in dockerfile.read_text().splitlines():
        words = line.split()
        if words[:1] == ["COPY"] and not any(word.startswith("--") for word in words):
            folders += [word.rstrip("/") for word in words[1:-1] if word.endswith("/")]
    return folders


def check_schema_in_image(config: PipelineConfig) -> None:
    """Refuses a schema file the pipeline image will not hold (a gs:// one is read there).

    Raises:
      ConfigError: the file is missing here, or in a folder the image does not copy.
    """
    in_image = container_schema_file(config)
    if in_image.startswith("gs://"):
        return
    relative = pathlib.PurePosixPath(in_image).relative_to(CONTAINER_SOURCE_DIR)
    local = REPO_ROOT / relative
    if not local.is_file():
        raise ConfigError(
            f"dataset.schema_file: {local} does not exist, so the image will not hold it; "
            "write it with `tpu-pipeline schema infer` (a local run bootstraps one in "
            "RUN/schema/schema.pbtxt) into schemas/, rebuild the image, or give a gs:// URI"
        )
    if relative.parts[0] not in image_folders():
        raise ConfigError(
            f"dataset.schema_file: {local} is in {relative.parts[0]}/, which "
            f"kubeflow/Dockerfile does not copy into the image; put it under schemas/"
        )


def model_size_warning(config: PipelineConfig) -> str | None:
    """A line when a network trains from scratch at a size far above what that learns well at."""
    trainer, shape = config.trainer, config.dataset.image_shape
    scratch = trainer.pretrained_weights == "none" or trainer.model not in IMAGENET_FILES
    if ":" in trainer.model or not scratch or max(shape[:2]) <= SCRATCH_SIDES[-1]:
        return None
    return (
        f"trainer.model {trainer.model} trains from scratch at {shape[0]}x{shape[1]}: slow, "
        "and weak on a few thousand photos; set trainer.model: mobilenet_v2 with "
        f"trainer.pretrained_weights: imagenet, or dataset.image_shape at most "
        f"{SCRATCH_SIDES[-1]}x{SCRATCH_SIDES[-1]}"
    )
