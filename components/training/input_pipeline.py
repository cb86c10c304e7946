"""The Trainer's tf.data input: TFRecord -> parse -> decode or transform -> batch -> prefetch.

Everything runs here, on the host, in parallel and ahead of the accelerator, so
the accelerator receives dense float images of a static shape only. Pixel data is
batched before parsing, so parsing and the Transform graph run once per batch,
vectorised. Photos (stored encoded) are decoded one by one in parallel calls,
training images as random crops (`random_resized_crop`, `components/images/decode.py`),
evaluation images whole through the Transform graph, which decodes with the same ops;
photos trained whole (no random crops) are decoded once and cached as 8-bit pixels
when they fit. Every batch has the same size, which TPUs (and XLA in general) need
to compile the step once: training drops the remainder of each pass (it repeats
anyway); evaluation fills its last batch with examples weighted 0, so it sees every
eval example once, even when the split is smaller than one batch.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import tensorflow as tf
import tensorflow_transform as tft
from absl import logging

from tpu_pipeline.common.config import DatasetConfig
from tpu_pipeline.components.contract import IMAGE_KEY, LABEL_KEY
from tpu_pipeline.components.images.decode import (
    MAX_8BIT,
    decode_encoded_image,
    random_resized_crop,
    unit_range,
)
from tpu_pipeline.components.training.augmentation import Augmentation

# Training files up to this size (gzipped) are kept in memory, decompressed, after the
# first pass: GZIP decompression was ~3/4 of the input's CPU per example, and caching
# raised the input rate ~7x (docs/benchmarks.md). Larger sets stream from disk.
CACHE_MAX_GZIP_BYTES = 128 * 2**20
# Photos trained whole (no random crop) decode to the same pixels every pass: up to this
# many bytes of them are kept decoded (8-bit) instead, which cut the input's CPU per
# CIFAR-10 photo from ~130 to ~31 us (docs/benchmarks.md, "CIFAR-10").
DECODED_CACHE_MAX_BYTES = 512 * 2**20

NO_AUGMENTATION = Augmentation()


def _files(file_patterns: list[str]) -> list[str]:
    return [path for pattern in file_patterns for path in tf.io.gfile.glob(pattern)]


@dataclasses.dataclass(frozen=True)
class HostShare:
    """What one input pipeline (one host) reads of the training files.

    Attributes:
      whole: files only this host reads, every record of them.
      shared: the files left over when the count is not a multiple of the hosts: every
        host reads them and keeps every n-th record, starting at its own index.
    """

    whole: list[str]
    shared: list[str]


def host_share(paths: list[str], num_input_pipelines: int, input_pipeline_id: int) -> HostShare:
    """This host's share of the sorted training files: every n-th of the first whole multiple
    of n files, and its n-th of the records of the rest.

    Sorting makes every host agree on the split without talking to the others. Whole files
    cost each host only its own reads; the remainder split by record keeps every host at the
    same number of files' worth of records, so with 5 files on 4 hosts no host holds twice
    the others' and wraps around into a second pass while another is still in its first.
    """
    if not paths:
        raise ValueError("no training files to read")
    ordered = sorted(paths)
    split = len(ordered) - len(ordered) % num_input_pipelines
    return HostShare(ordered[input_pipeline_id:split:num_input_pipelines], ordered[split:])


def host_records(paths: list[str], shard: tuple[int, int], seed: int | None) -> tf.data.Dataset:
    """Serialized training examples of one input pipeline: its share, in a shuffled file order.

    A shared file is split by record as it is read, before its records meet any other
    file's: one file reads in one order on every host, whereas a parallel interleave with
    `deterministic=False` (needed for throughput) returns records in the order they arrive,
    a different one on each host, so splitting after it let hosts read the same record
    twice and skip others.

    Args:
      paths: every training file.
      shard: (num_input_pipelines, input_pipeline_id) of this host's InputContext.
      seed: the file order's shuffle (reshuffled every pass).
    """
    shards, index = shard
    share = host_share(paths, shards, index)
    if share.shared:
        logging.warning(
            "%d training files for %d input pipelines: every host reads the last %d files and "
            "keeps every %d-th record of each; write a multiple of %d files to read less",
            len(paths),
            shards,
            len(share.shared),
            shards,
            shards,
        )
    files = share.whole + share.shared
    # Per file: keep every `num`-th record from `first`; (1, 0) keeps a whole file.
    num = [1] * len(share.whole) + [shards] * len(share.shared)
    first = [0] * len(share.whole) + [index] * len(share.shared)
    order = tf.data.Dataset.from_tensor_slices(
        (files, tf.constant(num, tf.int64), tf.constant(first, tf.int64))
    ).shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    return order.interleave(
        lambda path, num, first: _read(path).shard(num, first),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=False,
    )


def count_examples(file_patterns: list[str]) -> int:
    """Records in the gzipped TFRecord files: how many examples one epoch passes over."""
    records = _interleave(tf.data.Dataset.list_files(file_patterns, shuffle=False), True)
    return int(records.reduce(tf.constant(0, tf.int64), lambda count, _: count + 1))


def steps_per_epoch(
    epochs: int, train_steps: int | None, train_files: list[str], batch_size: int
) -> int:
    """Batches per epoch: `train_steps` split over the epochs, else one pass over the data.

    Without a step count, training length follows the data: `epochs` passes of
    whole global batches (at least one batch per epoch), so the same
    configuration suits 1,000 images and 100,000.
    """
    if train_steps is not None:
        return max(1, train_steps // epochs)
    return max(1, count_examples(train_files) // batch_size)


def global_batch_size(per_replica_batch_size: int, num_replicas: int) -> int:
    """Each replica gets `per_replica_batch_size` examples of every global batch."""
    if per_replica_batch_size < 1 or num_replicas < 1:
        raise ValueError(
            "batch size and replicas must be positive, "
            f"got {per_replica_batch_size} x {num_replicas}"
        )
    return per_replica_batch_size * num_replicas


def make_dataset(
    file_patterns: list[str],
    transform_output: tft.TFTransformOutput,
    dataset: DatasetConfig,
    batch_size: int,
    *,
    shuffle_buffer: int = 4096,
    seed: int | None = None,
    shard: tuple[int, int] = (1, 0),
    augmentation: Augmentation = NO_AUGMENTATION,
    class_weights: tuple[float, ...] | None = None,
) -> tf.data.Dataset:
    """Training input: `(images, labels[, weights])` batches of exactly `batch_size`, shuffled,
    forever.

    Args:
      file_patterns: gzipped TFRecord files of raw examples, as ExampleGen wrote them.
      transform_output: the Transform component's graph.
      dataset: shapes and feature names.
      batch_size: the global batch size.
      shuffle_buffer: examples held for shuffling.
      seed: makes shuffling repeatable.
      shard: (num_input_pipelines, input_pipeline_id): this host reads only its
        share (`host_records`): whole files, and every `shards`-th record of the files
        left over when their count is not a multiple of the hosts.
      augmentation: applied after the cache, so every pass draws new crops, shifts
        and flips; whole images flip by turns (`Augmentation.flip_alternates`), each
        mirrored in every other pass.
      class_weights: the loss weight of each class's examples; None weighs all 1.
    """
    paths = _files(file_patterns)
    shards, _ = shard
    records = host_records(paths, shard, seed)
    # Alternating flips: every element carries whether to mirror the example (`_by_turns`).
    alternate = augmentation.flip_alternates
    if alternate:
        records = records.map(lambda record: (record, _mirrored_first(record)))
    fits = sum(tf.io.gfile.stat(path).length for path in paths) <= CACHE_MAX_GZIP_BYTES * shards
    decoded = fits and _decoded_photos_fit(paths, dataset, augmentation, shards)
    if decoded:  # the same pixels every pass: decoded once, cached 8-bit
        decode = _parse_and_decode_8bit_photo(transform_output, dataset)
        records = records.map(_carrying_flips(decode, alternate), tf.data.AUTOTUNE)
    if fits:
        records = records.cache()
    records = records.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True).repeat()
    if alternate:
        records = _by_turns(records, _host_examples(paths, shard))
    if decoded:  # 8-bit photos: scaled to 0..1 a batch at a time
        scale = _carrying_flips(lambda images, labels: (unit_range(images), labels), alternate)
        batches = records.batch(batch_size, drop_remainder=True).map(scale, tf.data.AUTOTUNE)
    elif not dataset.stores_encoded_images:  # pixel data: parsed and transformed a batch at a time
        parse = _parse_and_transform(transform_output, dataset, batch_size)
        batches = records.batch(batch_size, drop_remainder=True).map(
            _carrying_flips(parse, alternate), tf.data.AUTOTUNE
        )
    else:  # photos: decoded one by one (a random crop if set), then batched
        decode = _parse_and_decode_photo(transform_output, dataset, augmentation.crop_area)
        batches = records.map(_carrying_flips(decode, alternate), tf.data.AUTOTUNE).batch(
            batch_size, drop_remainder=True
        )
    if alternate:
        batches = batches.map(_mirror, tf.data.AUTOTUNE)
    if augmentation.per_batch:
        batches = batches.map(
            lambda images, labels: (augmentation(images), labels), tf.data.AUTOTUNE
        )
    if class_weights is not None:
        weights = tf.constant(class_weights, tf.float32)
        batches = batches.map(lambda images, labels: (images, labels, tf.gather(weights, labels)))
    return batches.prefetch(tf.data.AUTOTUNE)


def _mirrored_first(record: tf.Tensor) -> tf.Tensor:
    """Whether an example is mirrored in the first pass: a fixed half of the examples, chosen
    by their bytes, so the choice needs no state and is the same on every host and pass."""
    return tf.equal(tf.strings.to_hash_bucket_fast(record, 2), 1)


def _carrying_flips(fn, alternate: bool):
    """`fn` of an element, passing along the mirror flag that follows it when `alternate`."""
    if not alternate:
        return fn

    def carry(*element):
        *inputs, mirror = element
        return (*fn(*inputs), mirror)

    return carry


def _host_examples(paths: list[str], shard: tuple[int, int]) -> int:
    """Examples in one pass of this host's share of the files (`host_share`)."""
    share = host_share(paths, *shard)
    whole = count_examples(share.whole) if share.whole else 0
    shared = count_examples(share.shared) // shard[0] if share.shared else 0
    return max(1, whole + shared)


def _by_turns(records: tf.data.Dataset, examples_per_pass: int) -> tf.data.Dataset:
    """Shuffled, repeated `(..., mirrored_first)` elements to `(..., mirror)`: each example
    is mirrored in every other pass, by its position in the stream over the pass's length.

    A host whose count is off by a few (a shared file's records split unevenly) only moves
    the turn a few examples early or late.
    """

    def turn(position, element):
        *inputs, mirrored_first = element
        odd_pass = tf.equal((position // examples_per_pass) % 2, 1)
        return (*inputs, tf.not_equal(mirrored_first, odd_pass))

    return records.enumerate().map(turn, tf.data.AUTOTUNE)


def _mirror(images: tf.Tensor, labels: tf.Tensor, mirror: tf.Tensor):
    """The batch with the flagged images mirrored left-right."""
    return tf.where(mirror[:, None, None, None], tf.reverse(images, [2]), images), labels


def _decoded_photos_fit(
    paths: list[str], dataset: DatasetConfig, augmentation: Augmentation, shards: int
) -> bool:
    """Whether photos train whole (no random crop) and, decoded to 8-bit pixels, fit in
    DECODED_CACHE_MAX_BYTES on each of `shards` hosts."""
    if not dataset.stores_encoded_images or augmentation.crop_area is not None:
        return False
    decoded_bytes = math.prod(dataset.image_shape) * count_examples(paths)
    return decoded_bytes <= DECODED_CACHE_MAX_BYTES * shards


@dataclasses.dataclass(frozen=True)
class EvalInput:
    """The eval split as the Trainer validates on it.

    Attributes:
      dataset: `(images, labels, weights)` batches, or None when the split is empty.
      examples: how many eval examples it holds (the ones with a weight).
    """

    dataset: tf.data.Dataset | None
    examples: int


def make_eval_dataset(
    file_patterns: list[str],
    transform_output: tft.TFTransformOutput,
    dataset: DatasetConfig,
    batch_size: int,
    *,
    max_batches: int | None = None,
) -> EvalInput:
    """Every eval example once, in file order, in batches of exactly `batch_size`.

    Dropping the partial last batch skipped validation altogether on a split smaller
    than one global batch, and a smaller last batch would make XLA compile the step
    again (and cannot be split across TPU cores). So the last batch is filled with
    copies of the first example weighted 0. The real examples weigh padded/real, not
    1: Keras averages the loss over every example of a batch, filler included, and
    this weight makes `val_loss` (and the weighted accuracy) the mean over the real
    examples exactly.

    Args:
      file_patterns: gzipped TFRecord files of raw examples, as ExampleGen wrote them.
      transform_output: the Transform component's graph.
      dataset: shapes and feature names.
      batch_size: the global batch size.
      max_batches: validate on at most this many batches (TFX's eval steps).
    """
    records = _interleave(tf.data.Dataset.list_files(file_patterns, shuffle=False), True)
    examples = count_examples(file_patterns)
    if max_batches:
        examples = min(examples, max_batches * batch_size)
        records = records.take(examples)
    if not examples:
        return EvalInput(None, 0)
    padded = -(-examples // batch_size) * batch_size
    weight = tf.constant(padded / examples, tf.float32)
    filler = records.take(1).map(lambda record: (record, tf.constant(0.0)))
    weighted = records.map(lambda record: (record, weight)).concatenate(
        filler.repeat(padded - examples)
    )
    parse = _parse_and_transform(transform_output, dataset, batch_size)
    batches = (
        weighted.batch(batch_size, drop_remainder=True)
        .map(lambda serialized, weights: (*parse(serialized), weights), tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )
    # Across workers, split each global batch (not files): every worker then runs the same
    # number of evaluation steps, which their lock-step all-reduce needs.
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return EvalInput(batches.with_options(options), examples)


def _read(path: tf.Tensor) -> tf.data.Dataset:
    """One gzipped TFRecord file's records, in file order."""
    return tf.data.TFRecordDataset(path, compression_type="GZIP")


def _interleave(files: tf.data.Dataset, deterministic: bool) -> tf.data.Dataset:
    return files.interleave(_read, num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)


def _parse_and_transform(
    transform_output: tft.TFTransformOutput, dataset: DatasetConfig, batch_size: int
):
    """Parses a batch of serialized examples and applies the Transform graph, static shapes."""
    raw_feature_spec = transform_output.raw_feature_spec()
    image_shape = [batch_size, *dataset.image_shape]

    def parse(serialized: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        raw = tf.io.parse_example(serialized, raw_feature_spec)
        transformed = transform_output.transform_raw_features(raw, drop_unused_features=True)
        images = tf.ensure_shape(transformed[IMAGE_KEY], image_shape)
        labels = tf.ensure_shape(transformed[LABEL_KEY], [batch_size])
        return images, labels

    return parse


def _parse_and_decode_photo(
    transform_output: tft.TFTransformOutput,
    dataset: DatasetConfig,
    crop_area: tuple[float, float] | None,
):
    """Parses one serialized example of an encoded photo and decodes it (a random crop if set).

    The whole-photo decode and the 0..1 scaling are the ones the Transform graph
    applies (`components/preprocessing.py`), so without a crop training images
    are exactly what evaluation and serving see.
    """
    raw_feature_spec = transform_output.raw_feature_spec()
    spec = {name: raw_feature_spec[name] for name in (dataset.pixel_feature, dataset.label_feature)}

    def decode(serialized: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        raw = tf.io.parse_single_example(serialized, spec)
        encoded = tf.reshape(raw[dataset.pixel_feature], [])
        if crop_area is not None:
            pixels = random_resized_crop(encoded, dataset.image_shape, crop_area)
        else:
            pixels = decode_encoded_image(encoded, dataset)
        label = tf.reshape(tf.cast(raw[dataset.label_feature], tf.int64), [])
        return unit_range(pixels), label

    return decode


def sample_images(
    file_patterns: list[str],
    transform_output: tft.TFTransformOutput,
    dataset: DatasetConfig,
    count: int,
) -> np.ndarray:
    """Up to `count` training images [n, height, width, channels] as evaluation sees them
    (whole, no augmentation): the first records of the files in sorted order, the same
    images on every run of the same data."""
    files = sorted(_files(file_patterns))
    records = _interleave(tf.data.Dataset.from_tensor_slices(files), True).take(count)
    if dataset.stores_encoded_images:
        decode = _parse_and_decode_photo(transform_output, dataset, None)
        images = records.map(decode, tf.data.AUTOTUNE).map(lambda image, _: image)
        batches = images.batch(1024)
    else:
        spec = transform_output.raw_feature_spec()

        def transform(serialized: tf.Tensor) -> tf.Tensor:
            raw = tf.io.parse_example(serialized, spec)
            return transform_output.transform_raw_features(raw, drop_unused_features=True)[
                IMAGE_KEY
            ]

        batches = records.batch(1024).map(transform, tf.data.AUTOTUNE)
    arrays = [batch.numpy() for batch in batches]
    if not arrays:
        raise ValueError(f"no training images in {file_patterns} to initialize the model from")
    return np.concatenate(arrays).reshape(-1, *dataset.image_shape)


def _parse_and_decode_8bit_photo(transform_output: tft.TFTransformOutput, dataset: DatasetConfig):
    """Parses one serialized example of an encoded photo and decodes it whole, as 8-bit
    pixels (a quarter of float32's memory in a cache); `unit_range` of them is exactly what
    `_parse_and_decode_photo` without a crop returns."""
    decode = _parse_and_decode_photo(transform_output, dataset, None)

    def decode_8bit(serialized: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        pixels, label = decode(serialized)
        return tf.cast(tf.round(pixels * MAX_8BIT), tf.uint8), label

    return decode_8bit


def count_labels(file_patterns: list[str], dataset: DatasetConfig) -> list[int]:
    """Examples of each class in the gzipped TFRecord files (one pass, labels only)."""
    spec = {dataset.label_feature: tf.io.FixedLenFeature([1], tf.int64)}
    records = _interleave(tf.data.Dataset.list_files(file_patterns, shuffle=False), False)
    labels = records.batch(1024).map(
        lambda batch: tf.reshape(tf.io.parse_example(batch, spec)[dataset.label_feature], [-1]),
        tf.data.AUTOTUNE,
    )
    counts = labels.reduce(
        tf.zeros([dataset.num_classes], tf.int64),
        lambda total, batch: (
            total + tf.math.bincount(batch, minlength=dataset.num_classes, dtype=tf.int64)
        ),
    )
    return [int(count) for count in counts.numpy()]


def distributed_training_dataset(
    strategy: tf.distribute.Strategy,
    file_patterns: list[str],
    transform_output: tft.TFTransformOutput,
    dataset: DatasetConfig,
    global_batch: int,
    *,
    shuffle_buffer: int,
    seed: int,
    augmentation: Augmentation = NO_AUGMENTATION,
    class_weights: tuple[float, ...] | None = None,
) -> tf.distribute.DistributedDataset | tf.data.Dataset:
    """The training input, one pipeline per host, each reading its own shard of the files.

    TensorFlow calls `worker_dataset` once per input pipeline: on every worker of
    a TF_CONFIG cluster, and for each host of a multi-host TPU slice, whose CPU
    feeds that host's chips. Every replica gets batches of `global_batch /
    replicas` examples. With one host and the default strategy this is the plain
    dataset.
    """

    def worker_dataset(context: tf.distribute.InputContext) -> tf.data.Dataset:
        return make_dataset(
            file_patterns,
            transform_output,
            dataset,
            context.get_per_replica_batch_size(global_batch),
            shuffle_buffer=shuffle_buffer,
            seed=seed,
            shard=(context.num_input_pipelines, context.input_pipeline_id),
            augmentation=augmentation,
            class_weights=class_weights,
        )

    return strategy.distribute_datasets_from_function(worker_dataset)
