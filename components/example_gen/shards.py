"""Writes one output split shuffled, into enough gzipped TFRecord shards for parallel reads.

Sources often come sorted by class (an image folder is read folder by folder, a
CSV may be sorted by label). TFX's own writer keeps that order on the local
runner (its Reshuffle groups by random keys, and the grouping keeps arrival
order) and writes one file, so a Trainer's shuffle buffer smaller than a class
would see batches of one class. Here every record gets a key from a keyed hash
of its bytes: the key picks its shard (a range of keys) and its place in the
shard, so the order is a pseudo-random permutation that does not depend on the
source's order or the runner, and the same records always give the same files.

Memory does not grow with the split. Beam's local runners hold a grouping in
memory, so records never pass through one: they stream into spill files on
disk, one per range of keys (`bucket`), and only the small spill-file names are
grouped. Each final shard then reads the spill files whose key range overlaps
its own, sorts its records (one shard in memory: ~128 MiB for a large split)
and writes them gzipped. On a distributed runner each bundle writes its own spill
files (at most one per key range), in the output folder's file system.

Shards: `shard_count` below, written under a temporary folder and renamed into
place only once every shard is written, like Beam's own file sinks.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import posixpath
import uuid
from collections.abc import Iterable, Iterator

import apache_beam as beam
import tensorflow as tf
from apache_beam.transforms.window import GlobalWindows

# At least this many shards, so every worker or host of a small slice gets whole files...
MIN_SHARDS = 16
# ...unless the split is small: a shard holds at least this many records on average...
MIN_RECORDS_PER_SHARD = 64
# ...and a large split gets one shard per this many serialized bytes (before gzip).
TARGET_SHARD_BYTES = 128 << 20
SHARD_PREFIX = "data_tfrecord"
DEFAULT_SEED = b"tpu-pipeline"
KEY_BITS = 64


def shard_count(records: int, total_bytes: int) -> int:
    """How many files a split of `records` examples and `total_bytes` serialized bytes gets.

    max(ceil(bytes / 128 MiB), min(16, ceil(records / 64))), at least 1: 1,440
    digits -> 16 files of 90, 300 records -> 5, 30 -> 1, 140 GB of photos -> ~1,050.
    """
    by_size = math.ceil(total_bytes / TARGET_SHARD_BYTES)
    by_count = min(MIN_SHARDS, math.ceil(records / MIN_RECORDS_PER_SHARD))
    return max(1, by_size, by_count)


def spill_buckets(expected_bytes: int) -> int:
    """Spill files per bundle: about as many as the split will have shards (at least 16).

    An estimate is enough: a shard reads every spill file whose key range overlaps
    its own, so a low estimate costs extra reads, a high one more small files.
    """
    return max(MIN_SHARDS, math.ceil(expected_bytes / TARGET_SHARD_BYTES))


def shard_name(index: int, count: int) -> str:
    """`data_tfrecord-00003-of-00016.gz`: TFX's file prefix, Beam's shard numbering."""
    return f"{SHARD_PREFIX}-{index:05d}-of-{count:05d}.gz"


def record_key(record: bytes, seed: bytes = DEFAULT_SEED) -> int:
    """The 64-bit key that places a record: its shard (a key range) and its order in it."""
    digest = hashlib.blake2b(record, digest_size=KEY_BITS // 8, key=seed).digest()
    return int.from_bytes(digest, "big")


def key_range(key: int, parts: int) -> int:
    """Which of `parts` equal ranges of 64-bit keys `key` falls in."""
    return (key * parts) >> KEY_BITS


def overlapping_shards(bucket: int, buckets: int, shards: int) -> range:
    """The shards whose key range overlaps spill `bucket`'s (of `buckets` equal ranges)."""
    first = bucket * shards // buckets
    last = -(-(bucket + 1) * shards // buckets) - 1  # ceil, then inclusive
    return range(first, last + 1)


@dataclasses.dataclass(frozen=True)
class SpillFile:
    """One bundle's records of one key range, uncompressed, in arrival order."""

    bucket: int
    path: str
    records: int
    size: int


class _Spill(beam.DoFn):
    """Streams records into one spill file per key range; emits the files when the bundle ends."""

    def __init__(self, spill_dir: str, buckets: int, seed: bytes):
        self._spill_dir, self._buckets, self._seed = spill_dir, buckets, seed

    def start_bundle(self):
        self._open: dict[int, tuple[str, tf.io.TFRecordWriter, list[int]]] = {}

    def process(self, record: bytes):
        bucket = key_range(record_key(record, self._seed), self._buckets)
        if bucket not in self._open:
            path = posixpath.join(self._spill_dir, f"{bucket:05d}-{uuid.uuid4().hex}")
            self._open[bucket] = path, tf.io.TFRecordWriter(path), [0, 0]
        _, writer, counts = self._open[bucket]
        writer.write(record)
        counts[0] += 1
        counts[1] += len(record)

    def finish_bundle(self) -> Iterator:
        for bucket, (path, writer, (records, size)) in sorted(self._open.items()):
            writer.close()
            yield GlobalWindows.windowed_value(SpillFile(bucket, path, records, size))
        self._open = {}


class _CountBytes(beam.CombineFn):
    """(records, serialized bytes) of a split, from its spill files."""

    def create_accumulator(self):
        return 0, 0

    def add_input(self, accumulator, spill: SpillFile):
        return accumulator[0] + spill.records, accumulator[1] + spill.size

    def merge_accumulators(self, accumulators):
        records = size = 0
        for more_records, more_size in accumulators:
            records, size = records + more_records, size + more_size
        return records, size

    def extract_output(self, accumulator):
        return accumulator


def _assign(spill: SpillFile, buckets: int, size: tuple[int, int]) -> Iterator[tuple[int, str]]:
    for shard in overlapping_shards(spill.bucket, buckets, shard_count(*size)):
        yield shard, spill.path


class _WriteShard(beam.DoFn):
    """Writes one shard's records, in key order, to a gzipped file in the temporary folder."""

    def __init__(self, temp_dir: str, seed: bytes):
        self._temp_dir, self._seed = temp_dir, seed

    def process(self, element: tuple[int, Iterable[str]], size: tuple[int, int]):
        index, spill_paths = element
        count = shard_count(*size)
        keyed = []  # one shard in memory: ~1/shards of the split
        for record in tf.data.TFRecordDataset(sorted(spill_paths)).as_numpy_iterator():
            key = record_key(record, self._seed)
            if key_range(key, count) == index:
                keyed.append((key, record))
        keyed.sort()
        path = posixpath.join(self._temp_dir, f"{index:05d}-{uuid.uuid4().hex}.gz")
        with tf.io.TFRecordWriter(path, options="GZIP") as writer:
            for _, record in keyed:
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
    records: beam.PCollection,
    split_dir: str,
    expected_bytes: int = 0,
    seed: bytes = DEFAULT_SEED,
) -> beam.PCollection:
    """Writes serialized records into `split_dir` as `shard_count` shuffled, gzipped shards.

    Args:
      records: serialized `tf.train.Example`s of one split.
      split_dir: the split's output folder (e.g. `.../examples/7/Split-train`).
      expected_bytes: about how many serialized bytes the split holds (sizes the spill).
      seed: keys the hash that orders the records; the same seed gives the same files.
    """
    temp_dir = posixpath.join(split_dir, f".temp-{uuid.uuid4().hex}")
    spill_dir = posixpath.join(temp_dir, "spill")
    tf.io.gfile.makedirs(spill_dir)
    buckets = spill_buckets(expected_bytes)
    spills = records | "Spill" >> beam.ParDo(_Spill(spill_dir, buckets, seed))
    size = beam.pvalue.AsSingleton(spills | "CountBytes" >> beam.CombineGlobally(_CountBytes()))
    return (
        spills
        | "PickShards" >> beam.FlatMap(_assign, buckets, size)
        | "GroupShards" >> beam.GroupByKey()
        | "WriteShards" >> beam.ParDo(_WriteShard(temp_dir, seed), size)
        | "ListShards" >> beam.combiners.ToList()
        | "Finalize" >> beam.Map(_finalize, size, split_dir, temp_dir)
    )
