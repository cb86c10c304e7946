"""One reader per source format: files in, checked `(split, tf.train.Example)` records out.

A reader yields the predefined split of each record ("train" or "eval") where
the source has one (Keras .npz keys, MNIST's t10k files, CIFAR-10's
test_batch) and None otherwise. Readers never unpickle: every file is sniffed
for a pickle header first, and .npz archives are loaded with allow_pickle=False.
"""

from __future__ import annotations

import codecs
import csv
import dataclasses
import functools
import gzip
import itertools
import posixpath
import struct
import zlib
from collections.abc import Callable, Iterator

import numpy as np
import tensorflow as tf
from google.protobuf.message import DecodeError

from tpu_pipeline.common.config import ConfigError, DatasetConfig, SourceConfig
from tpu_pipeline.components.example_gen.errors import (
    DataFormatError,
    open_source,
)
from tpu_pipeline.components.example_gen.examples import ExampleBuilder
from tpu_pipeline.components.example_gen.tfrecords import read_records

Record = tuple["str | None", tf.train.Example]
TRAIN, EVAL = "train", "eval"


@dataclasses.dataclass(frozen=True)
class SourceFormat:
    """How one format is read.

    Attributes:
      name: the `dataset.format` value.
      read: yields the records of one input file.
      default_pattern: the files read when `dataset.file_pattern` is not set.
      inputs: picks the files `read` is called on from all files the pattern
        matched (IDX reads each labels file together with its images file).
      splits_in: the predefined splits one input file holds.
      hint: added to the "no file matches" error.
    """

    name: str
    read: Callable[[str, ExampleBuilder], Iterator[Record]]
    default_pattern: str
    inputs: Callable[[list[str]], list[str]] = list
    splits_in: Callable[[str], set[str]] = lambda path: set()
    hint: str = ""


def _is_test_file(path: str) -> bool:
    return posixpath.basename(path).startswith(("t10k", "test"))


# --- TFRecord of tf.train.Example -------------------------------------------------------------


def read_tfrecord(path: str, builder: ExampleBuilder) -> Iterator[Record]:
    """Reads a TFRecord file (plain or gzipped) of `tf.train.Example`s, every record checked."""
    split = _folder_split(path)
    count = 0
    for index, serialized in read_records(path):
        yield split, _example_from_record(serialized, builder, f"{path}: record {index}")
        count += 1
    if not count:
        raise DataFormatError(f"{path}: holds no examples")


def read_tfrecord_batches(
    path: str, builder: ExampleBuilder, batch_size: int
) -> Iterator[tuple[list[bytes], list[int | None]]]:
    """Yields a layout-ready TFRecord file's records in batches, checked as `read_tfrecord`
    checks each: `(serialized examples, labels)`, a label None where a record has none.

    For a source in the pipeline's layout (`imports_unchanged`), one traced graph
    of `tf.io.parse_example` checks a whole batch for what the record check asks of
    floats: an Example, the pixel feature with exactly the configured count of
    float values, the label (where there is one) one int64. Numpy then checks the
    pixels finite and the labels in range, and the records go on as they are:
    about 20 µs less per record than building each example again, more than a
    small model (digits) takes to predict it. Any batch the parse or the numpy
    checks refuse is checked again a record at a time, so bad input stops with the
    record check's own message, naming the record; records that pass it that way
    (e.g. int64 pixels) go on as `read_tfrecord` builds them.

    Raises:
      DataFormatError: as `read_tfrecord`.
    """
    batch: list[bytes] = []
    start = 0
    for index, serialized in read_records(path):
        batch.append(serialized)
        if len(batch) == batch_size:
            yield _checked_batch(path, start, batch, builder)
            start, batch = index + 1, []
    if batch:
        yield _checked_batch(path, start, batch, builder)
    elif not start:
        raise DataFormatError(f"{path}: holds no examples")


def _checked_batch(path: str, start: int, batch: list[bytes], builder: ExampleBuilder):
    labels = _labels_if_batch_passes(batch, builder)
    if labels is not None:
        return batch, labels
    examples = [
        _example_from_record(serialized, builder, f"{path}: record {start + offset}")
        for offset, serialized in enumerate(batch)
    ]
    labels = [builder.label_of(example) for example in examples]
    return [example.SerializeToString() for example in examples], labels


def _labels_if_batch_passes(batch: list[bytes], builder: ExampleBuilder) -> list | None:
    """The batch's labels (None for none) if every record passes the record check, else None."""
    dataset = builder.dataset
    check = _batch_check(dataset.pixel_feature, dataset.pixel_count, dataset.label_feature)
    try:
        finite, labels, has_label = (part.numpy() for part in check(tf.constant(batch)))
    except tf.errors.InvalidArgumentError:
        return None
    in_range = (labels >= 0) & (labels < dataset.num_classes)
    if not finite or not in_range[has_label].all():
        return None
    if builder.labels_required and not has_label.all():
        return None
    return [int(label) if known else None for label, known in zip(labels, has_label, strict=True)]


@functools.lru_cache(maxsize=8)
def _batch_check(pixel: str, pixel_count: int, label: str) -> Callable:
    """A graph, traced once per layout: whether every pixel is finite, the labels, which exist.

    It raises InvalidArgumentError for a record the parse refuses.
    """

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def check(serialized):
        parsed = tf.io.parse_example(
            serialized,
            {
                pixel: tf.io.FixedLenFeature([pixel_count], tf.float32),
                # A default only where the feature is missing: an empty or longer one fails.
                label: tf.io.FixedLenFeature([1], tf.int64, default_value=[0]),
            },
        )
        present = tf.io.parse_example(serialized, {label: tf.io.VarLenFeature(tf.int64)})[label]
        has_label = tf.scatter_nd(
            present.indices[:, :1],
            tf.ones_like(present.values, tf.bool),
            tf.shape(serialized, out_type=tf.int64),
        )
        finite = tf.reduce_all(tf.math.is_finite(parsed[pixel]))
        return finite, parsed[label][:, 0], has_label

    return check


def read_tfrecord_unchanged(path: str) -> Iterator[Record]:
    """Reads the examples of a TFRecord file already in the pipeline's layout, as they are."""
    split = _folder_split(path)
    count = 0
    for index, serialized in read_records(path):
        try:
            yield split, tf.train.Example.FromString(serialized)
        except DecodeError:
            raise DataFormatError(f"{path}: record {index}: not a tf.train.Example") from None
        count += 1
    if not count:
        raise DataFormatError(f"{path}: holds no examples")


def imports_unchanged(dataset: DatasetConfig) -> bool:
    """Whether the records need no conversion, so ExampleGen can copy them as they are.

    `image_value_range` is left out: it scales decoded images, and float pixels are
    never decoded (it still tells the serving signature how to scale image bytes);
    so is `odd_images`, which only image sources have.
    """
    default = SourceConfig()
    reading_options = dataset.source.model_copy(
        update={"image_value_range": default.image_value_range, "odd_images": default.odd_images}
    )
    return dataset.format == "tfrecord" and reading_options == SourceConfig()


# Folder names that say which split their TFRecords are (without dataset.split_patterns).
SPLIT_FOLDERS = {"train": TRAIN, "test": EVAL, "eval": EVAL, "val": EVAL, "validation": EVAL}


def _folder_split(path: str) -> str | None:
    """TFRecords in `train/` and `test/` (or `eval/`, `val/`, `validation/`) folders keep that
    split."""
    folder = posixpath.basename(posixpath.dirname(path))
    return SPLIT_FOLDERS.get(folder)


def _example_from_record(serialized: bytes, builder: ExampleBuilder, where: str):
    dataset = builder.dataset
    source = dataset.source
    try:
        features = tf.train.Example.FromString(serialized).features.feature
    except DecodeError:
        raise DataFormatError(f"{where}: not a tf.train.Example") from None
    pixel_name = source.pixel_feature or dataset.pixel_feature
    label_name = source.label_feature or dataset.label_feature
    required = [(pixel_name, "pixel"), (source.id_feature, "id")]
    if builder.labels_required:
        required.append((label_name, "label"))
    for name, role in required:
        if name and name not in features:
            raise DataFormatError(f"{where}: no {role} feature {name!r}")
    labels = [None]
    # A label feature holding no kind of value is no label to TensorFlow's parser (and
    # to `read_tfrecord_batches`); a source whose labels are required is refused for it.
    if label_name in features and (
        features[label_name].WhichOneof("kind") or builder.labels_required
    ):
        label_feature = features[label_name]
        label_kind = label_feature.WhichOneof("kind")
        labels = getattr(label_feature, label_kind).value if label_kind else []
        if label_kind == "float_list" or len(labels) != 1:
            raise DataFormatError(
                f"{where}: label feature {label_name!r} must hold one int64 or string value"
            )
    extra = {source.id_feature: features[source.id_feature]} if source.id_feature else None
    pixel_feature = features[pixel_name]
    kind = pixel_feature.WhichOneof("kind")
    if dataset.stores_encoded_images:
        encoded = pixel_feature.bytes_list.value
        if kind != "bytes_list" or len(encoded) != 1:
            raise DataFormatError(f"{where}: feature {pixel_name!r} must hold one encoded image")
        return builder.build_image(encoded[0], labels[0], where, extra)
    if kind == "bytes_list":
        raise DataFormatError(
            f"{where}: feature {pixel_name!r} holds bytes; for PNG/JPEG images set "
            "dataset.source.pixel_encoding: image"
        )
    pixels = np.asarray(getattr(pixel_feature, kind).value if kind else [])
    return builder.build(pixels, labels[0], where, extra)


# --- Keras-layout .npz ------------------------------------------------------------------------

_NPZ_SPLITS = ((TRAIN, "x_train", "y_train"), (EVAL, "x_test", "y_test"))


def read_npz(path: str, builder: ExampleBuilder) -> Iterator[Record]:
    """Reads `x_train`/`y_train` and optionally `x_test`/`y_test`, never unpickling."""
    with open_source(path) as handle, _load_npz(path, handle) as archive:
        for split, x_key, y_key in _npz_parts(path, archive):
            images = _npz_array(path, archive, x_key, "biuf", "numbers")
            labels = _npz_array(path, archive, y_key, "iuUS", "integers or strings").reshape(-1)
            if len(images) != len(labels):
                raise DataFormatError(
                    f"{path}: {x_key} holds {len(images)} images but {y_key} {len(labels)} labels"
                )
            if not len(images):
                raise DataFormatError(f"{path}: {x_key} holds no examples")
            flat = images.reshape(len(images), -1)
            for index in range(len(flat)):
                where = f"{path}: {x_key}[{index}]"
                yield split, builder.build(flat[index], labels[index].item(), where)


def _load_npz(path: str, handle) -> np.lib.npyio.NpzFile:
    try:
        archive = np.load(handle, allow_pickle=False)
    except (ValueError, OSError, EOFError, zlib.error) as error:
        raise DataFormatError(f"{path}: not an .npz archive ({error})") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise DataFormatError(f"{path}: holds a single .npy array, not an .npz archive")
    return archive


def _npz_parts(path: str, archive) -> list[tuple[str, str, str]]:
    parts = [part for part in _NPZ_SPLITS if part[1] in archive.files]
    if not parts:
        raise DataFormatError(
            f"{path}: holds {sorted(archive.files)}; expected x_train and y_train "
            "(and optionally x_test and y_test) as Keras datasets use"
        )
    for _, x_key, y_key in parts:
        if y_key not in archive.files:
            raise DataFormatError(f"{path}: holds {x_key} but no {y_key}")
    return parts


def _npz_array(path: str, archive, key: str, kinds: str, allowed: str) -> np.ndarray:
    try:
        array = archive[key]
    except ValueError as error:  # object arrays need pickle, which is off
        raise DataFormatError(
            f"{path}: array {key} cannot be loaded without pickle ({error}); "
            "save plain numeric arrays"
        ) from None
    if array.dtype.kind not in kinds:
        raise DataFormatError(f"{path}: {key} has dtype {array.dtype}; expected {allowed}")
    return array


def _npz_splits(path: str) -> set[str]:
    with open_source(path) as handle, _load_npz(path, handle) as archive:
        return {split for split, x_key, _ in _NPZ_SPLITS if x_key in archive.files}


# --- MNIST IDX --------------------------------------------------------------------------------

_IDX_UBYTE = 0x08


def read_idx(path: str, builder: ExampleBuilder) -> Iterator[Record]:
    """Reads an IDX images file (gzipped or not) with the labels file next to it."""
    images = _read_idx_array(path)
    labels = _read_idx_array(idx_partner(path))
    if images.ndim not in (3, 4) or labels.ndim != 1:
        raise DataFormatError(
            f"{path}: images have {images.ndim} dimensions and labels {labels.ndim}; "
            "expected 3 (or 4 with channels) and 1"
        )
    if len(images) != len(labels):
        raise DataFormatError(f"{path}: {len(images)} images but {len(labels)} labels")
    if not len(images):
        raise DataFormatError(f"{path}: holds no examples")
    split = EVAL if _is_test_file(path) else TRAIN
    flat = images.reshape(len(images), -1)
    for index in range(len(flat)):
        yield split, builder.build(flat[index], int(labels[index]), f"{path}: image {index}")


def _is_idx_labels(path: str) -> bool:
    return "labels" in posixpath.basename(path)


def idx_partner(path: str) -> str:
    """The other file of an IDX pair beside `path` (the labels of images, the images of
    labels), gzipped or not.

    Raises:
      DataFormatError: it is not there; names the file and the missing partner.
    """
    directory, name = posixpath.split(path.removesuffix(".gz"))
    if _is_idx_labels(path):
        partner, kind = name.replace("labels", "images").replace("idx1", "idx3"), "images"
    else:
        partner, kind = name.replace("images", "labels").replace("idx3", "idx1"), "labels"
    partner = posixpath.join(directory, partner)
    for candidate in (partner, partner + ".gz"):
        if tf.io.gfile.exists(candidate):
            return candidate
    raise DataFormatError(
        f"{path}: no {kind} file {partner}[.gz] next to it; an IDX dataset needs both files "
        "of each pair (images and labels)"
    )


def _read_idx_array(path: str) -> np.ndarray:
    with open_source(path) as handle:
        try:
            data = gzip.GzipFile(fileobj=handle).read() if path.endswith(".gz") else handle.read()
        except (OSError, EOFError, zlib.error) as error:
            raise DataFormatError(f"{path}: not a valid gzip file ({error})") from None
    if len(data) < 4 or data[:2] != b"\0\0" or data[2] != _IDX_UBYTE or not data[3]:
        magic = data[:4].hex() or "none"
        raise DataFormatError(
            f"{path}: wrong IDX magic number 0x{magic}; expected 0x00000803 (images) "
            "or 0x00000801 (labels) of unsigned bytes"
        )
    ndim = data[3]
    header = 4 + 4 * ndim
    dims = struct.unpack(f">{ndim}I", data[4:header]) if len(data) >= header else ()
    expected = int(np.prod(dims)) if dims else -1
    if len(data) - header != expected:
        raise DataFormatError(
            f"{path}: header says {dims} values but the file holds {max(len(data) - header, 0)} "
            "bytes of them; truncated?"
        )
    return np.frombuffer(data, np.uint8, offset=header).reshape(dims)


def _idx_inputs(files: list[str]) -> list[str]:
    """The images files, once every file matched is known to have its partner: a labels file
    alone would otherwise be dropped and its split read as missing."""
    for path in files:
        idx_partner(path)
    return [path for path in files if not _is_idx_labels(path)]


# --- CIFAR-10 binary --------------------------------------------------------------------------


def read_cifar10_binary(path: str, builder: ExampleBuilder) -> Iterator[Record]:
    """Reads records of one label byte and channels-first pixel bytes (CIFAR-10 binary)."""
    height, width, channels = builder.dataset.image_shape
    size = 1 + height * width * channels
    with open_source(path) as handle:
        data = handle.read()
    if not data:
        raise DataFormatError(f"{path}: holds no examples")
    if len(data) % size:
        raise DataFormatError(
            f"{path}: {len(data)} bytes are not whole {size}-byte records (a label byte and "
            f"{height}x{width}x{channels} pixels); truncated, or not the CIFAR-10 binary version"
        )
    records = np.frombuffer(data, np.uint8).reshape(-1, size)
    split = EVAL if _is_test_file(path) else TRAIN
    for index, record in enumerate(records):
        pixels = record[1:].reshape(channels, height, width).transpose(1, 2, 0)
        yield split, builder.build(pixels, int(record[0]), f"{path}: record {index}")


# --- Image folders ----------------------------------------------------------------------------


def read_image_file(path: str, builder: ExampleBuilder) -> Iterator[Record]:
    """Reads one PNG/JPEG whose class is its folder's name (a number or one of label_names).

    The example keeps the file's bytes as they are (shrunk only with `source.max_image_side`).
    Without `builder.labels_required`, a folder whose name is no class gives no label.
    """
    class_name = posixpath.basename(posixpath.dirname(path))
    with open_source(path) as handle:
        data = handle.read()
    label = class_name
    if not builder.labels_required and not builder.names_a_class(class_name):
        label = None
    elif builder.dataset.source.label_names is None and class_name.isdigit():
        label = int(class_name)
    yield None, builder.build_image(data, label, path)


# --- CSV --------------------------------------------------------------------------------------


def read_csv(path: str, builder: ExampleBuilder) -> Iterator[Record]:
    """Reads a CSV with a header: the label column, an optional id column, pixel columns.

    Without `builder.labels_required` the label column may be missing.
    """
    dataset = builder.dataset
    label_name = dataset.source.label_feature or dataset.label_feature
    with open_source(path) as handle:
        rows = csv.reader(codecs.iterdecode(handle, "utf-8"))
        try:
            header = next(rows, None)
            if header is None:
                raise DataFormatError(f"{path}: is empty")
            if not builder.labels_required and label_name not in header:
                label_name = None
            columns = _csv_columns(path, header, label_name, dataset)
            count = 0
            for row in rows:
                if not row:
                    continue
                count += 1
                yield None, _example_from_row(row, rows.line_num, path, header, columns, builder)
        except (UnicodeDecodeError, csv.Error) as error:
            where = f"{path}: line {rows.line_num + 1}"
            raise DataFormatError(f"{where}: not UTF-8 CSV text ({error})") from None
    if not count:
        raise DataFormatError(f"{path}: holds no rows after the header")


def _csv_columns(path, header, label_name, dataset) -> tuple[int | None, int | None, list[int]]:
    id_name = dataset.source.id_feature
    for name in (label_name, id_name):
        if name and name not in header:
            raise DataFormatError(f"{path}: no column {name!r} in the header")
    label_column = header.index(label_name) if label_name else None
    id_column = header.index(id_name) if id_name else None
    pixel_columns = [i for i in range(len(header)) if i not in (label_column, id_column)]
    if len(pixel_columns) != dataset.pixel_count:
        others = " and ".join(repr(name) for name in (label_name, id_name) if name)
        raise DataFormatError(
            f"{path}: {len(pixel_columns)} pixel columns, expected {dataset.pixel_count} "
            f"(every column{f' but {others}' if others else ''})"
        )
    return label_column, id_column, pixel_columns


def _example_from_row(row, line, path, header, columns, builder):
    where = f"{path}: line {line}"
    if len(row) != len(header):
        raise DataFormatError(f"{where}: {len(row)} values, expected {len(header)} (the header)")
    label_column, id_column, pixel_columns = columns
    try:
        pixels = np.array([row[i] for i in pixel_columns], dtype=np.float32)
    except ValueError as error:
        raise DataFormatError(f"{where}: a pixel is not a number ({error})") from None
    label = row[label_column].strip() if label_column is not None else None
    extra = None
    if id_column is not None:
        id_value = tf.train.BytesList(value=[row[id_column].encode()])
        extra = {header[id_column]: tf.train.Feature(bytes_list=id_value)}
    if label is not None and label.lstrip("-").isdigit():
        label = int(label)
    return builder.build(pixels, label, where, extra)


FORMATS: dict[str, SourceFormat] = {
    source.name: source
    for source in (
        SourceFormat(
            "tfrecord",
            read_tfrecord,
            "*.tfrecord*",
            splits_in=lambda path: {_folder_split(path)} - {None},
        ),
        SourceFormat("npz", read_npz, "*.npz", splits_in=_npz_splits),
        SourceFormat(
            "idx",
            read_idx,
            "*ubyte*",
            inputs=_idx_inputs,
            splits_in=lambda path: {EVAL if _is_test_file(path) else TRAIN},
        ),
        SourceFormat(
            "cifar10_binary",
            read_cifar10_binary,
            "*.bin",
            splits_in=lambda path: {EVAL if _is_test_file(path) else TRAIN},
            hint=" (the CIFAR-10 binary version has data_batch_N.bin and test_batch.bin; "
            "the python version is pickle and is never read)",
        ),
        SourceFormat("image_folder", read_image_file, "*/*", hint=" (one sub-folder per class)"),
        SourceFormat("csv", read_csv, "*.csv"),
    )
}


def source_format(dataset: DatasetConfig) -> SourceFormat:
    """The reader of `dataset.format`; a ConfigError names the formats there are."""
    if dataset.format not in FORMATS:
        raise ConfigError(
            f"dataset.format: unknown format {dataset.format!r}; "
            f"allowed: {', '.join(sorted(FORMATS))}"
        )
    return FORMATS[dataset.format]


def file_pattern(dataset: DatasetConfig) -> str:
    """The files under `data_dir` the dataset reads: its own pattern, else its format's."""
    return dataset.file_pattern or source_format(dataset).default_pattern


def _inputs_matching(pattern: str, source: SourceFormat) -> list[str]:
    files = sorted(path for path in tf.io.gfile.glob(pattern) if not tf.io.gfile.isdir(path))
    return source.inputs(files)


def list_inputs(pattern: str, source: SourceFormat) -> list[str]:
    """The files `source.read` is called on, sorted; an error when nothing matches."""
    inputs = _inputs_matching(pattern, source)
    if not inputs:
        raise DataFormatError(f"{pattern}: no {source.name} input file matches{source.hint}")
    return inputs


def split_inputs(
    data_root: str, patterns: dict[str, str], source: SourceFormat
) -> dict[str, list[str]]:
    """The input files of each split's pattern (`dataset.split_patterns`, relative to `data_root`).

    Returns:
      `{split: sorted input files}`.

    Raises:
      DataFormatError: a pattern matches no input file, or a file is matched by two
        patterns (it would be trained on and evaluated on); names the patterns and folder.
    """
    inputs: dict[str, list[str]] = {}
    for split, pattern in patterns.items():
        inputs[split] = _inputs_matching(posixpath.join(data_root, pattern), source)
        if not inputs[split]:
            raise DataFormatError(
                f"dataset.split_patterns.{split} {pattern!r} matches no {source.name} input "
                f"file in {data_root}{source.hint}"
            )
    for (split, files), (other, other_files) in itertools.combinations(inputs.items(), 2):
        shared = sorted(set(files) & set(other_files))
        if shared:
            raise DataFormatError(
                f"{shared[0]}: matched by both dataset.split_patterns.{split} "
                f"{patterns[split]!r} and dataset.split_patterns.{other} {patterns[other]!r} "
                f"in {data_root}; a file belongs to one split"
                + (f" ({len(shared)} files are matched by both)" if len(shared) > 1 else "")
            )
    return inputs


def has_predefined_splits(inputs: list[str], source: SourceFormat) -> bool:
    """Whether the inputs hold both a train and an eval split (else ExampleGen hash-splits).

    Raises:
      DataFormatError: some files have a split and one has none (a TFRecord beside the
        split folders), so its examples would belong nowhere.
    """
    splits = {path: source.splits_in(path) for path in inputs}
    if not {TRAIN, EVAL} <= set().union(*splits.values()):
        return False
    unsplit = [path for path, found in splits.items() if not found]
    if unsplit:
        raise DataFormatError(
            f"{unsplit[0]}: is in no split folder ({', '.join(SPLIT_FOLDERS)}) while other "
            "files are; move it into one, or name each split's files with dataset.split_patterns"
        )
    return True


def train_carved_from_test(inputs: list[str], source: SourceFormat) -> list[str]:
    """The inputs, when every one of them is a test file: then the hash split carves the
    train split out of test data (MNIST's t10k files alone), which a person should be told.

    Empty when any input holds a train split or none says it is a test split.
    """
    splits = [source.splits_in(path) for path in inputs]
    if inputs and all(found == {EVAL} for found in splits):
        return inputs
    return []
