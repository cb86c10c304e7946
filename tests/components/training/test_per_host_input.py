"""Per-host input: each input pipeline (host) reads its own files; together, every record once."""

from __future__ import annotations

import itertools

import pytest
import tensorflow as tf

from components.training.input_pipeline import host_files, host_records


def write_files(folder, files: int, records_per_file: int) -> list[str]:
    paths = []
    for f in range(files):
        path = str(folder / f"data_tfrecord-{f:05d}-of-{files:05d}.gz")
        with tf.io.TFRecordWriter(path, options="GZIP") as writer:
            for r in range(records_per_file):
                writer.write(f"{f}/{r}".encode())
        paths.append(path)
    return paths


def one_pass(paths: list[str], hosts: int, host: int) -> list[bytes]:
    context = tf.distribute.InputContext(
        num_input_pipelines=hosts, input_pipeline_id=host, num_replicas_in_sync=4 * hosts
    )
    shard = (context.num_input_pipelines, context.input_pipeline_id)
    return [record.numpy() for record in host_records(paths, shard, seed=7)]


@pytest.mark.parametrize("hosts", [1, 2, 3, 4])
def test_per_host_files_are_disjoint_and_complete(hosts):
    paths = [f"gs://bucket/train/data_tfrecord-{i:05d}-of-00010.gz" for i in range(10)]
    shares = [host_files(list(reversed(paths)), hosts, host) for host in range(hosts)]
    for first, second in itertools.combinations(shares, 2):
        assert not set(first) & set(second)
    assert sorted(itertools.chain(*shares)) == sorted(paths)
    assert all(shares)  # no host idles


@pytest.mark.parametrize(("files", "hosts"), [(8, 4), (6, 4), (2, 4)], ids=["8-files", "6", "2"])
def test_per_host_records_cover_every_example_once_per_pass(tmp_path, files, hosts):
    paths = write_files(tmp_path, files, records_per_file=5)
    passes = [one_pass(paths, hosts, host) for host in range(hosts)]
    every = sorted(record for records in passes for record in records)
    assert every == sorted(f"{f}/{r}".encode() for f in range(files) for r in range(5))
    if files >= hosts:  # by whole files: each host opens only its own
        for host, records in enumerate(passes):
            opened = {record.split(b"/")[0] for record in records}
            assert opened == {str(f).encode() for f in range(host, files, hosts)}


def test_per_host_input_with_no_files_fails_clearly():
    with pytest.raises(ValueError, match="no training files"):
        host_files([], 4, 0)
