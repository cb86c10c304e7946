"""What a data folder holds, recognised from its layout and its files' own bytes.

`tpu-pipeline run --data-dir photos` takes a folder as Keras'
`image_dataset_from_directory` and Vertex AutoML do: nothing else to say. This
reads the folder listing, a sample of image headers (Pillow reads a JPEG's size
and mode without decoding it) and the first bytes of other files, imports no
TensorFlow, and returns the dataset fields a run needs; whatever the user set
wins over them (`cli/config_flags.py`).

Image folders (every file an image, by extension):
- class folders: `photos/<class>/*.jpg`;
- split folders holding class folders: `photos/train/<class>/*.jpg` with
  `val/`, `validation/`, `test/` or `eval/` beside (the first of these in that
  order is the eval split; another is left out, and the description says so);
- either one wrapped in one more folder (`photos/flowers/train/...`).
The classes are the class folders' names sorted, numerically when every name is a
whole number ("2" before "10"), else by code point as Keras sorts them; class i is
the i-th. The channels are 3 if any sampled image has colour, else 1. Without an
eval folder ExampleGen carves `dataset.eval_percent` of the photos by a hash of
their path: the same split on every run.

Other formats are recognised by content: IDX pairs (their magic numbers), CIFAR-10
binary (whole 3,073-byte records), `.npz` archives with `x_train`/`y_train`, and
TFRecords of `tf.Example` (read without TensorFlow, `example_proto.py`): the pixels are
the one feature of encoded PNG/JPEG bytes or of a float list of a square image's
length (one channel, or three), the label the one int64 feature with one value in
every record (or the one of them named label or class); the classes are counted over
every record.

A folder that could be read two ways, or trains on too little, is refused with
`DataFormatError` (exit 3) in one line, never guessed at: a class folder without
images, images at two depths, one class, fewer than MIN_IMAGES photos or
MIN_PER_CLASS a class, files that are no image among the photos.

`predict` also takes photos without class folders (`unlabelled=True`): a flat folder
of at least MIN_IMAGES photos, predicted without labels; its classes are the model's.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import itertools
import os
import pathlib
import re
import zipfile
from typing import Any

from google.protobuf.message import DecodeError
from PIL import Image, UnidentifiedImageError

from tpu_pipeline.components.example_gen.errors import DataFormatError
from tpu_pipeline.components.example_gen.example_proto import Example, read_serialized

IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".gif", ".bmp"})
# Eval folder names, in the order one is chosen when several are there.
EVAL_FOLDERS = ("val", "validation", "eval", "test")
TRAIN_FOLDER = "train"
MIN_IMAGES = 10
MIN_PER_CLASS = 2
# Image headers read for the channels: a few per class is enough to see colour.
CHANNEL_SAMPLE = 64
# From scratch, the recipe (pipeline/wiring/recipe.py) chooses the side from the photos.
PLACEHOLDER_SIDE = 64
_DOCUMENT_SUFFIXES = frozenset({".md", ".txt", ".html", ".rst", ".pdf"})
_GRAY_MODES = frozenset({"1", "L", "LA", "I", "I;16", "F"})
_CIFAR10_RECORD = 1 + 32 * 32 * 3
_CIFAR10_CLASSES = (
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
)


@dataclasses.dataclass(frozen=True)
class RecognizedData:
    """What a data folder was recognised as.

    Attributes:
      description: one line for people: the layout, classes, counts, channels.
      dataset: the `dataset:` fields it implies (a mapping `DatasetConfig` validates).
    """

    description: str
    dataset: dict[str, Any]


def dataset_name(folder: pathlib.Path, taken: frozenset[str] = frozenset()) -> str:
    """A dataset name from the folder's name (lower case, [a-z0-9_-]), never one of `taken`."""
    name = re.sub(r"[^a-z0-9_-]+", "-", folder.resolve().name.lower()).strip("-_") or "photos"
    return f"{name}-data" if name in taken else name


def class_order(names: set[str]) -> list[str]:
    """Class folder names in label order: numerically if all are whole numbers, else sorted."""
    if all(name.isdigit() for name in names):
        return sorted(names, key=int)
    return sorted(names)


def _visible(folder: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in folder.iterdir() if not p.name.startswith("."))


def _folders(root: pathlib.Path) -> list[pathlib.Path]:
    """The folders in `root`; images beside them are refused, other files left unread.

    Raises:
      DataFormatError: an image lies beside the folders (images at two depths).
    """
    entries = _visible(root)
    images = [entry for entry in entries if _is_image(entry)]
    if images:
        raise DataFormatError(
            f"{root}: holds the image {images[0].name} beside folders: images at two depths; "
            "put every image inside the folder of its class"
        )
    return [entry for entry in entries if entry.is_dir()]


def _is_document(path: pathlib.Path) -> bool:
    """A file that describes the data (README, LICENSE, batches.meta.txt), not data itself."""
    return path.suffix.lower() in _DOCUMENT_SUFFIXES or path.stem.upper() in ("README", "LICENSE")


def _is_image(path: pathlib.Path) -> bool:
    return path.is_file() and path.suffix.lower() in IMAGE_SUFFIXES


def _class_folders(root: pathlib.Path) -> dict[str, list[pathlib.Path]]:
    """The images of each class folder under `root`, checked for the odd cases.

    Raises:
      DataFormatError: images beside the class folders, a folder inside a class folder,
        a file that is no image, or a class folder without images.
    """
    classes: dict[str, list[pathlib.Path]] = {}
    for entry in _folders(root):
        inside = _visible(entry)
        nested = [p for p in inside if p.is_dir()]
        if nested:
            raise DataFormatError(
                f"{entry}: holds the folder {nested[0].name}: images at two depths; "
                "keep one folder per class with the images directly inside"
            )
        odd = [p for p in inside if not _is_image(p)]
        if odd:
            raise DataFormatError(
                f"{odd[0]}: not an image by its name (images end in "
                f"{', '.join(sorted(IMAGE_SUFFIXES))}); move it out of the class folder"
            )
        if not inside:
            raise DataFormatError(f"{entry}: a class folder without images")
        classes[entry.name] = inside
    return classes


def _channels(images: list[pathlib.Path]) -> int:
    step = max(1, len(images) // CHANNEL_SAMPLE)
    for path in images[::step]:
        try:
            with Image.open(path) as image:  # reads the header only
                if image.mode not in _GRAY_MODES:
                    return 3
        except (OSError, UnidentifiedImageError, ValueError):
            continue  # ExampleGen names the undecodable; the channels come from the rest
    return 1


def _image_folder(data_dir: pathlib.Path, taken: frozenset[str]) -> RecognizedData:
    root = data_dir
    entries = _folders(root)
    if len(entries) == 1 and _is_wrapper(entries[0]):
        root = entries[0]  # one wrapping folder (an unpacked archive)
        entries = _folders(root)
    names = {entry.name.lower() for entry in entries}
    split_names = names & {TRAIN_FOLDER, *EVAL_FOLDERS}
    if split_names and split_names != names:
        others = sorted(names - split_names)
        raise DataFormatError(
            f"{root}: holds split folders ({', '.join(sorted(split_names))}) and other "
            f"folders ({', '.join(others)}): which are classes is ambiguous; keep one layout"
        )
    by_name = {entry.name.lower(): entry for entry in entries}
    split_patterns = None
    left_out: list[str] = []
    if split_names:
        if TRAIN_FOLDER not in split_names:
            raise DataFormatError(f"{root}: split folders without a train folder")
        train = _class_folders(by_name[TRAIN_FOLDER])
        evals = [name for name in EVAL_FOLDERS if name in split_names]
        evaluated = _class_folders(by_name[evals[0]]) if evals else {}
        left_out = [by_name[name].name for name in evals[1:]]
        unknown = sorted(set(evaluated) - set(train))
        if unknown:
            raise DataFormatError(
                f"{by_name[evals[0]]}: class folder {unknown[0]} has no training photos "
                f"in {by_name[TRAIN_FOLDER]}"
            )
        train_pattern = f"{by_name[TRAIN_FOLDER].name}/*/*"
        if evals:
            split_patterns = {"train": train_pattern, "eval": f"{by_name[evals[0]].name}/*/*"}
        classes = {name: train[name] + evaluated.get(name, []) for name in train}
        layout = f"class folders in {by_name[TRAIN_FOLDER].name}/" + (
            f" and {by_name[evals[0]].name}/" if evals else ""
        )
    else:
        classes = _class_folders(root)
        train_pattern = "*/*"
        layout = "class folders"
    _check_enough(root, classes)
    order = class_order(set(classes))
    images = [path for name in order for path in classes[name]]
    channels = _channels(images)
    dataset: dict[str, Any] = {
        "name": dataset_name(data_dir, taken),
        "data_dir": str(root),
        "format": "image_folder",
        "image_shape": (PLACEHOLDER_SIDE, PLACEHOLDER_SIDE, channels),
        "pixel_feature": "image",
        "label_feature": "label",
        "num_classes": len(order),
        "source": {"label_names": order, "resize": True},
    }
    if split_patterns:
        dataset["split_patterns"] = split_patterns
    elif train_pattern != "*/*":
        dataset["file_pattern"] = train_pattern
    split = (
        "its own eval split"
        if split_patterns
        else "no eval folder: a reproducible share is carved out by a hash of each path"
    )
    shown = ", ".join(order[:6]) + (f", ... ({len(order)} in all)" if len(order) > 6 else "")
    skipped = f"; {', '.join(left_out)}/ left out (held back)" if left_out else ""
    colour = "colour (3 channels)" if channels == 3 else "grayscale (1 channel)"
    description = (
        f"{layout}: {len(images):,} photos of {len(order)} classes ({shown}), {colour}, "
        f"{split}{skipped}"
    )
    return RecognizedData(description, dataset)


def _is_wrapper(folder: pathlib.Path) -> bool:
    """Whether `folder` holds folders only (the one folder of an unpacked archive)."""
    entries = _visible(folder)
    return (
        bool(entries)
        and all(entry.is_dir() or not _is_image(entry) for entry in entries)
        and any(entry.is_dir() for entry in entries)
    )


def _check_enough(root: pathlib.Path, classes: dict[str, list[pathlib.Path]]) -> None:
    total = sum(len(images) for images in classes.values())
    if len(classes) < 2:
        raise DataFormatError(
            f"{root}: one class folder ({', '.join(classes) or 'none'}); a classifier needs "
            "at least two"
        )
    if total < MIN_IMAGES:
        raise DataFormatError(
            f"{root}: {total} photos in all; at least {MIN_IMAGES} are needed to train and "
            "evaluate a model"
        )
    small = sorted(name for name, images in classes.items() if len(images) < MIN_PER_CLASS)
    if small:
        raise DataFormatError(
            f"{root}: class folder {small[0]} holds fewer than {MIN_PER_CLASS} photos"
        )


def _read(path: pathlib.Path, size: int = -1) -> bytes:
    """The first `size` bytes of a file (all with -1), unzipped if it is gzipped."""
    with path.open("rb") as handle:
        if handle.read(2) == b"\x1f\x8b":
            handle.seek(0)
            with gzip.GzipFile(fileobj=handle) as unzipped:
                return unzipped.read(size)
        handle.seek(0)
        return handle.read(size)


def _idx_pairs(files: list[pathlib.Path]) -> RecognizedData | None:
    magic = {path: _read(path, 4) for path in files}
    images = [p for p, head in magic.items() if head == b"\0\0\x08\x03" or head == b"\0\0\x08\x04"]
    labels = [p for p, head in magic.items() if head == b"\0\0\x08\x01"]
    if not images or len(images) != len(labels) or len(images) + len(labels) != len(files):
        return None
    header = _read(images[0], 16)
    dims = [int.from_bytes(header[4 + 4 * i : 8 + 4 * i], "big") for i in range(header[3])][1:]
    height, width, channels = (*dims, 1)[:3]
    classes = max(max(_read(path)[8:] or b"\0") for path in labels) + 1
    dataset = {
        "format": "idx",
        "image_shape": (height, width, channels),
        "pixel_feature": "pixels",
        "label_feature": "label",
        "num_classes": max(2, classes),
    }
    return RecognizedData(
        f"IDX pairs: {len(images)} images file(s) of {height}x{width}, {classes} classes", dataset
    )


def _cifar10_binary(files: list[pathlib.Path]) -> RecognizedData | None:
    if not all(p.suffix == ".bin" and p.stat().st_size % _CIFAR10_RECORD == 0 for p in files):
        return None
    if any(max(p.read_bytes()[::_CIFAR10_RECORD], default=0) > 9 for p in files):  # labels
        return None
    records = sum(p.stat().st_size // _CIFAR10_RECORD for p in files)
    dataset = {
        "format": "cifar10_binary",
        "image_shape": (32, 32, 3),
        "pixel_feature": "pixels",
        "label_feature": "label",
        "num_classes": 10,
        "source": {"label_names": list(_CIFAR10_CLASSES)},
    }
    return RecognizedData(f"CIFAR-10 binary: {records:,} images of 32x32x3, 10 classes", dataset)


def _npz(files: list[pathlib.Path]) -> RecognizedData | None:
    import numpy as np

    if not all(p.suffix == ".npz" for p in files):
        return None
    try:
        with np.load(files[0], allow_pickle=False) as archive:
            if "x_train" not in archive.files or "y_train" not in archive.files:
                return None
            shape = archive["x_train"].shape[1:]
            labels = archive["y_train"]
            if "y_test" in archive.files:  # the classes of both splits
                labels = np.concatenate([labels.ravel(), archive["y_test"].ravel()])
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):
        return None  # not an archive: ExampleGen names what is wrong
    if len(shape) not in (2, 3) or labels.dtype.kind not in "iu":
        return None
    height, width, channels = (*shape, 1)[:3]
    classes = int(labels.max()) + 1
    dataset = {
        "format": "npz",
        "image_shape": (height, width, channels),
        "pixel_feature": "pixels",
        "label_feature": "label",
        "num_classes": max(2, classes),
    }
    return RecognizedData(
        f".npz archives (x_train, y_train): images of {height}x{width}x{channels}, "
        f"{classes} classes",
        dataset,
    )


TFRECORD_SAMPLE = 16
_IMAGE_MAGIC = (b"\x89PNG", b"\xff\xd8\xff")


def _tfrecords(files: list[pathlib.Path], unlabelled: bool = False) -> RecognizedData | None:
    if not all(".tfrecord" in path.name for path in files):
        return None
    try:
        sample = [
            Example.FromString(serialized).features.feature
            for serialized in itertools.islice(read_serialized(files[0]), TFRECORD_SAMPLE)
        ]
    except (ValueError, DecodeError):
        return None  # not TFRecords of tf.Example: ExampleGen names what is wrong
    if not sample:
        return None
    label = _label_feature(files[0], sample, unlabelled)
    pixels, shape, encoded = _pixel_feature(files[0], sample)
    try:
        classes = _tfrecord_classes(files, label) if label else 0
    except (ValueError, DecodeError):
        return None  # a file cut short or damaged: ExampleGen names it, record and offset
    dataset: dict[str, Any] = {
        "format": "tfrecord",
        "image_shape": shape,
        "pixel_feature": pixels,
        "label_feature": label or "label",
    }
    if label:
        dataset["num_classes"] = max(2, classes)
    if encoded:
        dataset["source"] = {"pixel_encoding": "image", "resize": True}
    kind = "encoded images" if encoded else f"{'x'.join(map(str, shape))} float pixels"
    labels = f"labels in {label!r}, {classes} classes" if label else "no labels"
    return RecognizedData(f"TFRecords of tf.Example: {kind} in {pixels!r}, {labels}", dataset)


def _label_feature(path: pathlib.Path, sample, unlabelled: bool = False) -> str | None:
    """The label feature; None for records without one when `unlabelled` (to predict on)."""
    names = sorted(
        name
        for name in sample[0]
        if all(name in f and len(f[name].int64_list.value) == 1 for f in sample)
    )
    named = [name for name in names if "label" in name.lower() or "class" in name.lower()]
    chosen = named if len(names) > 1 else names
    if not names and unlabelled:
        return None
    if len(chosen) != 1:
        raise DataFormatError(
            f"{path}: which feature is the label is ambiguous ({', '.join(names) or 'none'} "
            "hold one integer in every record); set dataset.label_feature"
        )
    return chosen[0]


def _pixel_feature(path: pathlib.Path, sample) -> tuple[str, tuple[int, int, int], bool]:
    found = []
    for name, feature in sample[0].items():
        if feature.bytes_list.value and feature.bytes_list.value[0].startswith(_IMAGE_MAGIC):
            found.append((name, (PLACEHOLDER_SIDE, PLACEHOLDER_SIDE, 3), True))
        elif feature.float_list.value:
            shape = _square_shape(len(feature.float_list.value))
            if shape is not None:
                found.append((name, shape, False))
    if len(found) != 1:
        names = ", ".join(sorted(name for name, _, _ in found)) or "none"
        raise DataFormatError(
            f"{path}: which feature holds the pixels is ambiguous (candidates: {names}); set "
            "dataset.pixel_feature and dataset.image_shape"
        )
    return found[0]


def _square_shape(length: int) -> tuple[int, int, int] | None:
    """The square image a float list of `length` values is: one channel, else three."""
    for channels in (1, 3):
        side = round((length / channels) ** 0.5)
        if side > 1 and side * side * channels == length:
            return (side, side, channels)
    return None


def _tfrecord_classes(files: list[pathlib.Path], label: str) -> int:
    highest = 0
    for path in files:
        for serialized in read_serialized(path):
            values = Example.FromString(serialized).features.feature[label].int64_list.value
            highest = max(highest, *values)
    return highest + 1


def recognize_folder(
    data_dir: str | os.PathLike, taken: frozenset[str] = frozenset(), unlabelled: bool = False
) -> RecognizedData | None:
    """What `data_dir` holds; None when its files say nothing this recognises (CSV: its
    columns are the user's to name).

    Args:
      data_dir: a local folder.
      taken: names the dataset may not take (the built-in datasets').
      unlabelled: photos without class folders are data too (to predict on): their
        dataset has no `num_classes` (the model's are meant).

    Raises:
      DataFormatError: an image folder is odd (see the module), or which TFRecord feature
        is which is ambiguous.
    """
    folder = pathlib.Path(data_dir)
    if not folder.is_dir():
        return None  # the run names the missing folder, as for a configured dataset
    entries = _visible(folder)
    files = [entry for entry in entries if entry.is_file() and not _is_document(entry)]
    if files and all(entry.is_file() for entry in entries):  # flat: files that say what they are
        tfrecords = functools.partial(_tfrecords, unlabelled=unlabelled)
        for recognize in (_idx_pairs, _cifar10_binary, _npz, tfrecords):
            found = recognize(files)
            if found is not None:
                found.dataset.update(name=dataset_name(folder, taken), data_dir=str(folder))
                return found
        if unlabelled and any(_is_image(path) for path in files):
            return _unlabelled_photos(folder, files, taken)
        if any(_is_image(path) for path in files):
            raise DataFormatError(
                f"{folder}: images without class folders; put each class's images in a "
                "folder named after the class"
            )
        return None
    if any(_is_image(path) for path in folder.rglob("*")):
        return _image_folder(folder, taken)
    return None


def _unlabelled_photos(folder: pathlib.Path, files: list[pathlib.Path], taken) -> RecognizedData:
    """A flat folder of photos to predict on: no classes, so no labels."""
    odd = [path for path in files if not _is_image(path)]
    if odd:
        raise DataFormatError(
            f"{odd[0]}: not an image by its name (images end in "
            f"{', '.join(sorted(IMAGE_SUFFIXES))}); move it out of the folder of photos"
        )
    if len(files) < MIN_IMAGES:
        raise DataFormatError(
            f"{folder}: {len(files)} photos in all; at least {MIN_IMAGES} are needed "
            "(a handful is better sent to a model server, docs/serving)"
        )
    channels = _channels(files)
    colour = "colour (3 channels)" if channels == 3 else "grayscale (1 channel)"
    dataset = {
        "name": dataset_name(folder, taken),
        "data_dir": str(folder),
        "format": "image_folder",
        "file_pattern": "*",
        "image_shape": (PLACEHOLDER_SIDE, PLACEHOLDER_SIDE, channels),
        "pixel_feature": "image",
        "label_feature": "label",
        "source": {"resize": True},
    }
    return RecognizedData(
        f"{len(files):,} photos without class folders, {colour}: predicted without labels",
        dataset,
    )
