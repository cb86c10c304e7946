"""The dataset a recognised data folder is predicted as: the model's classes, image shape
and features; the folder's files.

`predict --data-dir DIR` with nothing else recognises DIR as `run` does
(`components/example_gen/recognize.py`), but a model answers in its own terms: its
classes in its order, its image shape, its pixel features. Those come from the model
(`model_path.served_dataset`, else the configured dataset for a model exported before
the model kept them); the folder says only how its files are read and which labels
they carry. A class folder that is not one of the model's classes is refused (exit 3):
scoring it would count every photo of it as wrong, or right under another name.

Photos for a model trained on pixel data (the digits model given PNGs) are read as
photos, checked as ExampleGen checks them, and decoded into the model's pixels with the
same ops its `images` signature uses (`records.PhotoPixels`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tpu_pipeline.common.config import DatasetConfig
from tpu_pipeline.components.example_gen.errors import DataFormatError

_LAYOUT = ("format", "file_pattern", "split_patterns")


@dataclasses.dataclass(frozen=True)
class FolderPlan:
    """How a recognised folder is predicted.

    Attributes:
      dataset: what the model answers in (classes, shape, features), reading the folder.
      read_as: how the files are read when it is not `dataset` (photos for a pixel model).
      note: one line when the model's classes or image shape are not the folder's.
    """

    dataset: DatasetConfig
    read_as: DatasetConfig | None
    note: str | None

    @property
    def files(self) -> DatasetConfig:
        """The dataset whose format and patterns pick and read the files."""
        return self.read_as or self.dataset


def _kind(dataset: DatasetConfig) -> str:
    if dataset.stores_encoded_images:
        return "photos"
    return "8-bit pixels" if dataset.stores_8bit_pixels else "float pixels"


def _shape(shape) -> str:
    return "x".join(str(dim) for dim in shape)


def _shown(names: list[str]) -> str:
    return ", ".join(names[:10]) + (f", ... ({len(names)} in all)" if len(names) > 10 else "")


def _check_classes(folder: dict[str, Any], model: DatasetConfig) -> list[str] | None:
    """The folder's class names, when it has class folders; refused when not the model's.

    Raises:
      DataFormatError: a class folder, or a label, the model does not score.
    """
    classes = list(model.class_names)
    named = list((folder.get("source") or {}).get("label_names") or ())
    unknown = [name for name in named if name not in classes]
    if unknown:
        raise DataFormatError(
            f"{folder['data_dir']}: class folder {unknown[0]} is not a class of the model "
            f"({_shown(classes)}); predict it with the model trained on it, or move it out"
        )
    if not named and folder.get("num_classes", 0) > model.num_classes:
        raise DataFormatError(
            f"{folder['data_dir']}: labels up to {folder['num_classes'] - 1}, but the model "
            f"scores {model.num_classes} classes ({_shown(classes)}); give the model trained "
            "on this data"
        )
    return named or None


def plan_for_model(folder: dict[str, Any], served: dict[str, Any]) -> FolderPlan:
    """The datasets to predict the recognised `folder` with, for a model serving `served`.

    Args:
      folder: the `dataset:` fields the folder was recognised as (`RecognizedData.dataset`).
      served: the dataset fields the model answers in (`model_path.served_dataset`).

    Raises:
      DataFormatError: the folder's classes are not the model's, its images are of another
        kind (photos, 8-bit or float pixels) than the model takes and cannot become them,
        or pixel data of another shape.
    """
    model = DatasetConfig.model_validate(served)
    named = _check_classes(folder, model)
    where = {"name": folder["name"], "data_dir": folder["data_dir"]}
    layout = {key: folder[key] for key in _LAYOUT if key in folder}
    folder_source = folder.get("source") or {}
    reading = DatasetConfig.model_validate(
        {
            **folder,
            "num_classes": model.num_classes,
            "image_shape": model.image_shape,
            "source": {**folder_source, "label_names": model.source.label_names},
        }
    )
    read_as = None
    if _kind(reading) == _kind(model):
        source = {**served["source"]}
        if folder["format"] == "tfrecord":  # the folder's own feature names, read into the model's
            source.update(
                pixel_feature=folder["pixel_feature"], label_feature=folder["label_feature"]
            )
        if reading.stores_encoded_images:
            source["pixel_encoding"] = folder_source.get("pixel_encoding", "float")
        elif tuple(folder["image_shape"]) != model.image_shape:
            raise DataFormatError(
                f"{folder['data_dir']}: images of {_shape(folder['image_shape'])}, but the model "
                f"takes {_shape(model.image_shape)}; give the model trained on this data"
            )
        dataset = DatasetConfig.model_validate({**served, **where, **layout, "source": source})
    elif reading.stores_encoded_images:  # photos, decoded into the model's pixels
        dataset = DatasetConfig.model_validate({**served, **where})
        read_as = reading.model_copy(
            update={"source": reading.source.model_copy(update={"resize": True})}
        )
    else:
        raise DataFormatError(
            f"{folder['data_dir']}: holds {_kind(reading)}, but the model takes "
            f"{_kind(model)}; give the model trained on this kind of data"
        )
    return FolderPlan(dataset, read_as, _note(folder, named, model, reading))


def _note(
    folder: dict[str, Any], named: list[str] | None, model: DatasetConfig, reading: DatasetConfig
) -> str | None:
    """One line when the model's classes or image shape differ from the folder's."""
    classes = list(model.class_names)
    differs = []
    if named is not None and named != classes:
        differs.append(f"its {len(classes)} classes in its order ({_shown(classes)})")
    if reading.stores_encoded_images or tuple(folder["image_shape"]) != model.image_shape:
        resizes = reading.stores_encoded_images and (
            model.source.resize or not model.stores_encoded_images
        )
        resized = " (the photos are resized and converted to it)" if resizes else ""
        differs.append(f"its image shape {_shape(model.image_shape)}{resized}")
    if not differs:
        return None
    return f"tpu-pipeline: the model's terms win over the folder's: {'; '.join(differs)}"
