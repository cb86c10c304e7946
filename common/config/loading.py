"""Reading a configuration: a YAML file, then flags on top, into one validated PipelineConfig.

Apart from the sections so that the error text every user sees is written in one place.
"""

from __future__ import annotations

import pathlib
from typing import Any

import yaml
from pydantic import ValidationError

from tpu_pipeline.common.config.base import ConfigError
from tpu_pipeline.common.config.pipeline import PipelineConfig
from tpu_pipeline.common.config.secrets import SECRET_ERROR


def _set_dotted(tree: dict[str, Any], dotted_key: str, value: Any) -> None:
    *parents, leaf = dotted_key.split(".")
    for key in parents:
        node = tree.get(key)
        if isinstance(node, str):  # `dataset: mnist` becomes a mapping once a field is set
            node = {"name": node}
        tree[key] = node = dict(node or {})
        tree = node
    tree[leaf] = value


def _format_errors(error: ValidationError, source: str) -> str:
    lines = [f"invalid configuration ({source}):"]
    for item in error.errors():
        field = ".".join(str(part) for part in item["loc"]) or "<root>"
        message = item["msg"].removeprefix("Value error, ")
        shown = not isinstance(item["input"], dict) and item["type"] != SECRET_ERROR
        got = f" (got {item['input']!r})" if shown else ""
        lines.append(f"  {field}: {message}{got}")
    return "\n".join(lines)


def _merged(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """`base` with `top`'s fields on top, mapping by mapping (a built-in's name stays a name)."""
    merged = dict(base)
    for key, value in top.items():
        below = merged.get(key)
        if isinstance(below, dict) and isinstance(value, dict):
            merged[key] = _merged(below, value)
        else:
            merged[key] = value
    return merged


def user_dataset(path: str | None = None, overrides: dict[str, Any] | None = None) -> Any:
    """The `dataset` the user gave in the file or flags: a built-in's name, a mapping, or None."""
    return _raw_config(path, overrides)[0].get("dataset")


def _raw_config(path: str | None, overrides: dict[str, Any] | None) -> tuple[dict[str, Any], str]:
    """The user's fields as given (file, then flags on top) and where they came from."""
    raw: dict[str, Any] = {}
    source = "defaults"
    if path:
        source = str(path)
        try:
            loaded = yaml.safe_load(pathlib.Path(path).read_text())
        except (OSError, yaml.YAMLError) as error:
            raise ConfigError(f"cannot read configuration file {path}: {error}") from error
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"configuration file {path} must hold a mapping of fields")
        raw = loaded or {}
    flags = {key: value for key, value in (overrides or {}).items() if value is not None}
    for key, value in flags.items():
        _set_dotted(raw, key, value)
    if flags:
        source = f"{source} + flags"
    return raw, source


def _dotted_keys(tree: dict[str, Any], prefix: str = "") -> set[str]:
    keys = set()
    for key, value in tree.items():
        keys.add(prefix + str(key))
        if isinstance(value, dict):
            keys |= _dotted_keys(value, f"{prefix}{key}.")
    return keys


def explicit_fields(
    path: str | None = None, overrides: dict[str, Any] | None = None
) -> frozenset[str]:
    """The dotted fields the user set in the file or by flags (`trainer`, `trainer.epochs`, ...).

    Defaults chosen from the data (`pipeline/wiring/recipe.py`) never replace these; a
    built-in dataset's own fields (`dataset: signs`) are not the user's.
    """
    return frozenset(_dotted_keys(_raw_config(path, overrides)[0]))


def load_config(
    path: str | None = None,
    overrides: dict[str, Any] | None = None,
    base: dict[str, Any] | None = None,
) -> PipelineConfig:
    """Builds the configuration from an optional YAML file and dotted-key overrides.

    Args:
      path: YAML file with any subset of the fields; missing fields keep defaults.
      overrides: values from flags, keyed by dotted field name
        (e.g. `{"trainer.train_steps": 100, "dataset": "mnist"}`); they win over
        the file.
      base: fields below the file's (what was recognised in the data folder); the
        file and the flags win over them, and they are not the user's
        (`explicit_fields` leaves them out).

    Raises:
      ConfigError: the file cannot be read, or a field holds a value not allowed;
        the message names every offending field.
    """
    raw, source = _raw_config(path, overrides)
    if base:
        raw = _merged(base, raw)
    try:
        return PipelineConfig.model_validate(raw)
    except ValidationError as error:
        raise ConfigError(_format_errors(error, source)) from None
