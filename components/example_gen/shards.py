"""Writes one output split shuffled, into enough gzipped TFRecord shards for parallel reads.

Sources often come sorted by class (an image folder is read folder by folder, a
CSV may be sorted by label). TFX's own writer keeps that order on the local
runner (its Reshuffle groups by random keys, and the grouping keeps arrival
order) and writes one file, so a Trainer's shuffle buffer smaller than a class
would see batches of one class. Here every record gets a key from a keyed hash
of its bytes: the key picks its shard and its place in the shard, so the order
is a pseudo-random permutation that does not depend on the source's order or
the runner, and the same records always give the same files.

Shards: `shard_count` below, written under a temporary folder and renamed into
place only once every shard is written, like Beam's own file sinks.
"""

from __future__ import annotations

import hashlib
import math
import posixpath
import uuid
from collections.abc import Iterable

import apache_beam as beam
import tensorflow as tf

# At least this many shards, so every worker or host of a small slice gets whole files...
MIN_SHARDS = 16
# ...unless the split is small: a shard holds at least this many records on average...
MIN_RECORDS_PER_SHARD = 64
# ...and a large split gets one shard per this many serialized bytes (before gzip).
TARGET_SHARD_BYTES = 128 << 20
SHARD_PREFIX = "data_tfrecord"
DEFAULT_SEED = b"tpu-pipeline"


def shard_count(records: int, total_bytes: int) -> int:
    """How many files a split of `records` examples and `total_bytes` serialized bytes gets.

    max(ceil(bytes / 128 MiB), min(16, ceil(records / 64))), at least 1: 1,440
    digits -> 16 files of 90, 300 records -> 5, 30 -> 1, 140 GB of photos -> ~1,050.
    """
    by_size = math.ceil(total_bytes / TARGET_SHARD_BYTES)
    by_count = min(MIN_SHARDS, math.ceil(records / MIN_RECORDS_PER_SHARD))
    return max(1, by_size, by_count)


def shard_name(index: int, count: int) -> str:
    """`data_tfrecord-00003-of-00016.gz`: TFX's file prefix, Beam's shard numbering."""
    return f"{SHARD_PREFIX}-{index:05d}-of-{count:05d}.gz"


def record_key(record: bytes, seed: bytes = DEFAULT_SEED) -> int:
    """The 64-bit key that places a record: its shard (key % shards) and order in it."""
    digest = hashlib.blake2b(record, digest_size=8, key=seed).digest()
    return int.from_bytes(digest, "big")


class _CountBytes(beam.CombineFn):
    """(records, serialized bytes) of a PCollection of serialized records."""

    def create_accumulator(self):
        return 0, 0

    def add_input(self, accumulator, record):
        return accumulator[0] + 1, accumulator[1] + len(record[1])

    def merge_accumulators(self, accumulators):
        records = size = 0
        for more_records, more_size in accumulators:
            records, size = records + more_records, size + more_size
        return records, size

    def extract_output(self, accumulator):
        return accumulator


class _WriteShard(beam.DoFn):
    """Writes one shard's records, in key order, to a gzipped file in the temporary folder."""

    def __init__(self, temp_dir: str):
        self._temp_dir = temp_dir

    def process(self, element: tuple[int, Iterable[tuple[int, bytes]]]):
        index, keyed = element
        path = posixpath.join(self._temp_dir, f"{index:05d}-{uuid.uuid4().hex}.gz")
        with tf.io.TFRecordWriter(path, options="GZIP") as writer:
            for _, record in sorted(keyed):  # one shard in memory: ~1/shards of the split
                writer.write(record)
        yield index, path


def _finalize(written: list[tuple[int, str]], size: tuple[int, int], split_dir: str, temp_dir: str):
    """Renames every shard into place (an empty file for a shard no record hashed into)."""
    count = shard_count(*size)
    paths = dict(written)
    for index in range(count):
        target = posixpath.join(split_dir, shard_name(index, count))
        if index in paths:
            tf.io.gfile.rename(paths[index], target, overwrite=True)
        else:
            tf.io.TFRecordWriter(target, options="GZIP").close()
    tf.io.gfile.rmtree(temp_dir)


@beam.ptransform_fn
def WriteShuffledSplit(  # noqa: N802 (Beam transform)
    records: beam.PCollection, split_dir: str, seed: bytes = DEFAULT_SEED
) -> beam.PCollection:
    """Writes serialized records into `split_dir` as `shard_count` shuffled, gzipped shards.

    Args:
      records: serialized `tf.train.Example`s of one split.
      split_dir: the split's output folder (e.g. `.../examples/7/Split-train`).
      seed: keys the hash that orders the records; the same seed gives the same files.
    """
    temp_dir = posixpath.join(split_dir, f".temp-{uuid.uuid4().hex}")
    tf.io.gfile.makedirs(temp_dir)
    keyed = records | "Key" >> beam.Map(lambda record: (record_key(record, seed), record))
    size = beam.pvalue.AsSingleton(keyed | "CountBytes" >> beam.CombineGlobally(_CountBytes()))
    return (
        keyed
        | "PickShard" >> beam.Map(lambda item, size: (item[0] % shard_count(*size), item), size)
        | "GroupShards" >> beam.GroupByKey()
        | "WriteShards" >> beam.ParDo(_WriteShard(temp_dir))
        | "ListShards" >> beam.combiners.ToList()
        | "Finalize" >> beam.Map(_finalize, size, split_dir, temp_dir)
    )
