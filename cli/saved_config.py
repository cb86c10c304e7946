"""What `run --data-dir` recognised, said in its first lines and pinned with `--save-config`.

A run on a folder alone decides the dataset from the folder and the recipe from the
data; the user sees both before the first component, and `--save-config FILE`
writes them as a configuration file, so the next run (or a Vertex AI compile) reads
the same fields whatever the folder gains meanwhile. Only the `dataset:` section
and the fields chosen from the data are written: no other section, so no secret
(`notify:` webhooks) can reach the file.
"""

from __future__ import annotations

import pathlib
from typing import TYPE_CHECKING, Any

import yaml

from tpu_pipeline.common.config import PipelineConfig
from tpu_pipeline.common.owned_paths import write_owned

if TYPE_CHECKING:
    from tpu_pipeline.components.example_gen.recognize import RecognizedData
    from tpu_pipeline.pipeline.wiring.recipe import Recipe


def recognized_line(recognized: RecognizedData, data_dir: str | None) -> str:
    """The first line of every command given a data folder alone: what it was recognised as."""
    return f"tpu-pipeline: recognised {data_dir}: {recognized.description}"


def recognized_lines(
    recognized: RecognizedData | None, config: PipelineConfig, save_config: pathlib.Path | None
) -> list[str]:
    """The lines a run prints first about the data folder: what it is and how to pin it."""
    if recognized is None:
        return []
    dataset = config.dataset
    pin = (
        f"pinned in {save_config}: `tpu-pipeline run --config {save_config}` runs the same"
        if save_config
        else "to pin these fields, add --save-config FILE (then run --config FILE)"
    )
    return [
        recognized_line(recognized, dataset.data_dir),
        f"tpu-pipeline: dataset {dataset.name!r}, classes in folder-name order; its schema "
        f"is bootstrapped in {dataset.resolved_schema_file}; {pin}",
    ]


def saved_fields(config: PipelineConfig, recipe: Recipe) -> dict[str, Any]:
    """The `dataset:` section (fields that differ from the defaults) and the recipe's choices."""
    fields: dict[str, Any] = {
        "dataset": config.dataset.model_dump(mode="json", exclude_defaults=True)
    }
    for choice in recipe.choices:
        section, _, name = choice.field.partition(".")
        if section != "dataset":
            fields.setdefault(section, {})[name] = choice.value
    return fields


def save_config(path: pathlib.Path, config: PipelineConfig, recipe: Recipe) -> None:
    """Writes `saved_fields` as YAML to `path` (never over a file of the user's)."""
    header = (
        f"# Written by `tpu-pipeline run --save-config`: the dataset in {config.dataset.data_dir}\n"
        "# and the defaults chosen from it. Other flags of that run are not in it.\n"
        f"# Run the same again: tpu-pipeline run --config {path}\n"
    )
    text = yaml.safe_dump(saved_fields(config, recipe), sort_keys=False)
    write_owned(path, header + text, "--save-config")
