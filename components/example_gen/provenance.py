"""What an example records about where it came from, so the Evaluator can slice by it.

Two facts, each only where it tells slices apart: the span (`SPAN_FEATURE`, for a run
that reads several, `dataset.mixes_spans`) and the source folder
(`SOURCE_FOLDER_FEATURE`, with `dataset.source_folder_slices`): the file's folder below
`data_dir` without the span folder and an image folder's class folder, so the camera in
`span-3/phone/cat/1.jpg` read with `span-{SPAN}/*/*/*` is `phone`. A source example
that already has a feature of either name is refused: overwriting it would change the
data unseen.
"""

from __future__ import annotations

import dataclasses
import posixpath

import tensorflow as tf

from tpu_pipeline.common.config import DatasetConfig
from tpu_pipeline.components.contract import SOURCE_FOLDER_FEATURE, SPAN_FEATURE
from tpu_pipeline.components.example_gen.errors import DataFormatError


@dataclasses.dataclass(frozen=True)
class InputFile:
    """One file ExampleGen reads, and what each of its examples records (None: nothing)."""

    path: str
    span: int | None = None
    folder: str | None = None


def source_folder(path: str, data_root: str, pattern: str, dataset: DatasetConfig) -> str:
    """The folder of `path` (matched by `pattern` under `data_root`) that names its source:
    the span folder and an image folder's class folder left out; "." for none."""
    root = data_root.rstrip("/") + "/"
    relative = path[len(root) :] if path.startswith(root) else posixpath.relpath(path, data_root)
    folders = relative.split("/")[:-1]
    # A glob's `*` stays inside one folder, so folder i of the file is matched by part i.
    pattern_folders = pattern.split("/")[:-1]
    kept = [
        folder
        for index, folder in enumerate(folders)
        if not (index < len(pattern_folders) and "{SPAN" in pattern_folders[index])
    ]
    if dataset.format == "image_folder" and kept:
        kept = kept[:-1]  # the class
    return "/".join(kept) or "."


def recorded_features(dataset: DatasetConfig) -> dict[str, str]:
    """The features ExampleGen adds to every example of `dataset`, each with why."""
    recorded = {}
    if dataset.mixes_spans:
        recorded[SPAN_FEATURE] = (
            f"a run reads several spans (dataset.span_window {dataset.span_window})"
        )
    if dataset.source_folder_slices:
        recorded[SOURCE_FOLDER_FEATURE] = "dataset.source_folder_slices is on"
    return recorded


def input_file(
    path: str, data_root: str, pattern: str, dataset: DatasetConfig, span: int | None = None
) -> InputFile:
    """`path` with the facts `dataset` asks its examples to record."""
    folder = (
        source_folder(path, data_root, pattern, dataset) if dataset.source_folder_slices else None
    )
    return InputFile(path, span if dataset.mixes_spans else None, folder)


def record_provenance(example: tf.train.Example, source: InputFile, where: str) -> None:
    """Adds the span and source folder `source` holds to `example`.

    Raises:
      DataFormatError: the example already has a feature of that name.
    """
    features = example.features.feature
    added = {SPAN_FEATURE: source.span, SOURCE_FOLDER_FEATURE: source.folder}
    for name, value in added.items():
        if value is None:
            continue
        if name in features:
            raise DataFormatError(
                f"{where}: has a feature named {name!r}, which ExampleGen writes itself "
                "here (dataset.span_window above 1, dataset.source_folder_slices); rename "
                "the feature in the source, or turn off what records it"
            )
        if isinstance(value, int):
            features[name].int64_list.value.append(value)
        else:
            features[name].bytes_list.value.append(value.encode("utf-8"))
