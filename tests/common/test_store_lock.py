"""The lock on Cloud Storage, against a real Cloud Storage API server (fake-gcs-server).

Two creators at once, a dead holder's lease and a holder taken over are decided by the
store's generation preconditions.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from tpu_pipeline.common import gcs_objects
from tpu_pipeline.common.file_lock import LockBusyError
from tpu_pipeline.common.store_lock import held_store_lock
from tpu_pipeline.components.serving.versions import LOCK_FILE


def test_a_dead_holders_claim_is_taken_over_once_its_lease_ran_out(gcs_bucket):
    uri = f"{gcs_bucket.uri}/serving/{LOCK_FILE}"
    dead = {"what": "a push", "pid": 1, "host": "gone", "started": "then", "released": False}
    gcs_objects.create(uri, json.dumps({**dead, "expires": time.time() + 60}))
    with pytest.raises(LockBusyError, match="held by a push"):
        with held_store_lock(uri, "rollback", wait_seconds=0):
            pass
    stale = gcs_objects.read(uri)[1]
    gcs_objects.replace(uri, json.dumps({**dead, "expires": time.time() - 1}), stale)
    with held_store_lock(uri, "rollback", wait_seconds=0):
        assert json.loads(gcs_objects.read(uri)[0])["what"] == "rollback"


def test_a_holder_whose_lease_was_taken_over_does_not_release_the_new_holders_claim(gcs_bucket):
    uri = f"{gcs_bucket.uri}/serving/{LOCK_FILE}"
    with held_store_lock(uri, "slow push", lease_seconds=300):
        text, generation = gcs_objects.read(uri)
        # Its lease ran out (a stalled holder): another takes the lock over by its generation.
        expired = {**json.loads(text), "expires": time.time() - 1}
        gcs_objects.replace(uri, json.dumps(expired), generation)
        with held_store_lock(uri, "rollback", wait_seconds=0):
            pass
        gcs_objects.replace(
            uri, json.dumps({**expired, "what": "next", "owner": "x"}), gcs_objects.read(uri)[1]
        )
    assert json.loads(gcs_objects.read(uri)[0])["what"] == "next"  # the slow holder let it be


def test_only_one_of_two_creators_at_once_creates_an_object(gcs_bucket):
    uri = f"{gcs_bucket.uri}/claim"
    won: list[int] = []
    start = threading.Barrier(2)

    def create(number: int) -> None:
        start.wait()
        if gcs_objects.create(uri, str(number)) is not None:
            won.append(number)

    threads = [threading.Thread(target=create, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1 and gcs_objects.read(uri)[0] == str(won[0])
