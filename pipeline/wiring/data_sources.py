"""Finds (and for `digits`, writes) the raw TFRecord folder a run reads.

ExampleGen fingerprints its input files, so the built-in digits are
written once and then left alone: a rerun sees the same files and is cached.
"""

from __future__ import annotations

import pathlib

from tpu_pipeline.common.atomic_file import replaced_when_done
from tpu_pipeline.common.config import ConfigError, PipelineConfig
from tpu_pipeline.components.example_gen.errors import DataFormatError
from tpu_pipeline.components.example_gen.formats import file_pattern, source_format, split_inputs

DIGITS_FILE_NAME = "digits.tfrecord"


class DataSourceError(DataFormatError):
    """The configured data folder is missing or holds no matching files: a data rejection."""


def write_digits_tfrecord(path: pathlib.Path) -> int:
    """Writes scikit-learn's digits as `tf.train.Example`s (`pixels`, `label`).

    The file appears atomically (written aside, then renamed), so an
    interrupted first run never leaves a truncated file that later runs trust.

    Returns:
      The number of examples written.
    """
    import tensorflow as tf
    from sklearn.datasets import load_digits

    digits = load_digits()
    path.parent.mkdir(parents=True, exist_ok=True)
    with replaced_when_done(path) as partial:
        with tf.io.TFRecordWriter(partial) as writer:
            for pixels, label in zip(digits.data, digits.target, strict=True):
                example = tf.train.Example(
                    features=tf.train.Features(
                        feature={
                            "pixels": tf.train.Feature(
                                float_list=tf.train.FloatList(value=pixels.astype("float32"))
                            ),
                            "label": tf.train.Feature(
                                int64_list=tf.train.Int64List(value=[int(label)])
                            ),
                        }
                    )
                )
                writer.write(example.SerializeToString())
    return len(digits.target)


def prepare_data_root(config: PipelineConfig) -> pathlib.Path:
    """Returns the folder ExampleGen reads, writing built-in digits on first use.

    Raises:
      DataSourceError: the folder does not exist or has no file matching the
        configured pattern (one line naming both, and what the folder holds).
      ConfigError: a dataset other than digits has no data_dir.
      DataFormatError: a `dataset.split_patterns` pattern matches no file, or a
        file matches both.
    """
    dataset = config.dataset
    if dataset.data_dir is None and dataset.name == "digits":
        data_root = config.run_dir / "data" / "digits"
        if not (data_root / DIGITS_FILE_NAME).exists():
            write_digits_tfrecord(data_root / DIGITS_FILE_NAME)
        return data_root
    if dataset.data_dir is None:
        raise ConfigError(f"dataset.data_dir: dataset {dataset.name!r} needs its data folder")
    data_root = pathlib.Path(dataset.data_dir).resolve()
    patterns = dataset.split_patterns.model_dump() if dataset.split_patterns else {}
    pattern = file_pattern(dataset)
    searched = " and ".join(repr(p) for p in patterns.values()) if patterns else repr(pattern)
    if not data_root.is_dir():
        raise DataSourceError(
            f"dataset {dataset.name!r}: data folder {data_root} does not exist "
            f"(it would be searched for {searched})"
        )
    if patterns:
        split_inputs(str(data_root), patterns, source_format(dataset))
    elif not any(data_root.glob(pattern.replace("{SPAN}", "*"))):  # any span will do
        origin = "dataset.file_pattern" if dataset.file_pattern else "the format's default"
        raise DataSourceError(
            f"dataset {dataset.name!r}: no file in {data_root} matches {pattern!r} ({origin}); "
            f"{_what_it_holds(data_root)}"
        )
    return data_root


def _what_it_holds(folder: pathlib.Path, shown: int = 5) -> str:
    """A few of the files a folder holds, to show what a pattern missed."""
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    if not files:
        return "the folder is empty"
    more = f" and {len(files) - shown} more" if len(files) > shown else ""
    return (
        f"it holds {', '.join(files[:shown])}{more} "
        "(set dataset.format or dataset.file_pattern to read them)"
    )
