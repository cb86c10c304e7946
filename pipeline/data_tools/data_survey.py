"""A quick look at an image folder before any component runs: how many training photos, how big.

The run's defaults follow the data (`pipeline/wiring/recipe.py`): the batch must fit the
training split and the image size the photos. ExampleGen counts and measures exactly,
but only after the run has started with the wrong numbers; this reads the folder
listing and the headers of a sample of photos (Pillow reads a JPEG's size without
decoding it), which takes well under a second for thousands of files and imports
no TensorFlow.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import pathlib
import statistics

from PIL import Image, UnidentifiedImageError

from tpu_pipeline.common.config import DatasetConfig

# components/example_gen/formats.py's default pattern for image folders: a folder per class.
IMAGE_FOLDER_PATTERN = "*/*"
# Folder names that put a file in the eval split, as ExampleGen reads them.
EVAL_FOLDER_NAMES = frozenset({"test", "eval", "val", "validation"})
# Photos whose headers are read for the size statistics: enough for a stable median.
SIZE_SAMPLE = 64


@dataclasses.dataclass(frozen=True)
class DataSurvey:
    """What the folder holds, as far as a listing and a sample of headers tell.

    Attributes:
      train_examples: photos in the training split (the eval_percent share taken out
        when no folder or pattern names the splits).
      median_short_side: the median of each sampled photo's shorter side, in pixels;
        None when no sampled file could be read as an image.
      sampled: how many photos the median is taken over.
      eval_examples: photos in the eval split (which training validates on every epoch).
    """

    train_examples: int
    median_short_side: int | None
    sampled: int
    eval_examples: int = 0


def _files(data_dir: pathlib.Path, pattern: str) -> list[str]:
    return sorted(path for path in glob.glob(str(data_dir / pattern)) if os.path.isfile(path))


def _is_eval(path: str, data_dir: pathlib.Path) -> bool:
    parts = pathlib.Path(os.path.relpath(path, data_dir)).parts[:-1]
    return any(part.lower() in EVAL_FOLDER_NAMES for part in parts)


def _short_side(path: str) -> int | None:
    try:
        with Image.open(path) as image:  # reads the header only
            return min(image.size)
    except (OSError, UnidentifiedImageError, ValueError):
        return None  # ExampleGen names undecodable files; the survey only skips them


def survey_image_folder(dataset: DatasetConfig) -> DataSurvey | None:
    """The survey of an image folder dataset, or None for other formats or a missing folder."""
    if dataset.format != "image_folder" or not dataset.data_dir:
        return None
    data_dir = pathlib.Path(dataset.data_dir)
    if dataset.split_patterns is not None:
        train = _files(data_dir, dataset.split_patterns.train)
        every = train + _files(data_dir, dataset.split_patterns.eval)
    else:
        every = _files(data_dir, dataset.file_pattern or IMAGE_FOLDER_PATTERN)
        named_eval = [path for path in every if _is_eval(path, data_dir)]
        if named_eval:
            train = [path for path in every if not _is_eval(path, data_dir)]
        else:  # ExampleGen hashes eval_percent of them into the eval split
            train = every[: round(len(every) * (100 - dataset.eval_percent) / 100)]
    if not every:
        return None  # prepare_data_root names the empty folder in one line
    step = max(1, len(every) // SIZE_SAMPLE)
    sides = [side for side in map(_short_side, every[::step][:SIZE_SAMPLE]) if side]
    median = statistics.median_low(sides) if sides else None
    return DataSurvey(len(train), median, len(sides), len(every) - len(train))
