"""TF_CONFIG decides multi-worker training; a lost worker becomes one clear error."""

from __future__ import annotations

import json

import pytest
import tensorflow as tf

from components.multi_worker import (
    WorkerLostError,
    lost_worker_is_an_error,
    multi_worker_cluster,
    worker_output_dir,
)

VERTEX_TWO_REPLICAS = {
    "cluster": {"chief": ["host-0:2222"], "worker": ["host-1:2222"]},
    "task": {"type": "worker", "index": 0},
}


@pytest.mark.parametrize(
    "tf_config",
    [
        None,
        "",
        json.dumps({"cluster": {"chief": ["host-0:2222"]}, "task": {"type": "chief", "index": 0}}),
        json.dumps({"cluster": {}, "task": {}}),
    ],
)
def test_no_cluster_or_a_single_replica_is_not_multi_worker(tf_config):
    environ = {} if tf_config is None else {"TF_CONFIG": tf_config}
    assert multi_worker_cluster(environ) is None


def test_a_vertex_chief_and_worker_make_a_cluster():
    cluster = multi_worker_cluster({"TF_CONFIG": json.dumps(VERTEX_TWO_REPLICAS)})
    assert cluster == VERTEX_TWO_REPLICAS["cluster"]


@pytest.mark.parametrize(
    "tf_config, message",
    [
        ("{not json", "TF_CONFIG is not valid JSON"),
        (
            json.dumps({"cluster": {"chief": ["a:1"], "worker": ["b:1"], "ps": ["c:1"]}}),
            "use chief and worker replicas only",
        ),
    ],
)
def test_unusable_tf_config_fails_naming_it(tf_config, message):
    with pytest.raises(ValueError, match=message):
        multi_worker_cluster({"TF_CONFIG": tf_config})


def test_only_the_chief_writes_into_the_log_dir(tmp_path):
    with worker_output_dir(str(tmp_path), is_chief=True) as chief_dir:
        assert chief_dir == str(tmp_path)
    with worker_output_dir(str(tmp_path), is_chief=False) as scratch:
        assert scratch != str(tmp_path)
        (tmp_path.parent / scratch / "events").write_text("worker logs")
    assert not (tmp_path.parent / scratch).exists()


def test_an_aborted_all_reduce_names_the_lost_worker_and_the_backup():
    aborted = tf.errors.UnavailableError(None, None, "Collective ops aborted: heartbeat timeout")
    with pytest.raises(WorkerLostError, match="2-worker training cluster stopped") as raised:
        with lost_worker_is_an_error(2, "gs://bucket/backup/abc"):
            raise aborted
    assert "resumes from the last finished epoch backed up in gs://bucket/backup/abc" in str(
        raised.value
    )
    assert "heartbeat timeout" in str(raised.value)
    with pytest.raises(tf.errors.UnavailableError):  # one worker: nothing to blame on a peer
        with lost_worker_is_an_error(1, "backup"):
            raise aborted
