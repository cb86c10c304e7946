"""A damaged metadata store is named with what to do, and never touched."""

import sqlite3

import pytest

from tpu_pipeline.common.metadata_check import DamagedMetadataError, check_metadata_store


def write_store(path) -> None:
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE Execution (id INTEGER PRIMARY KEY, payload TEXT)")
        connection.executemany(
            "INSERT INTO Execution (payload) VALUES (?)", [("x" * 500,) for _ in range(200)]
        )
    connection.close()


def test_a_healthy_or_missing_store_passes(tmp_path):
    check_metadata_store(tmp_path / "missing.sqlite")
    assert not (tmp_path / "missing.sqlite").exists()
    write_store(tmp_path / "metadata.sqlite")
    check_metadata_store(tmp_path / "metadata.sqlite")


@pytest.mark.parametrize(
    "damage, problem",
    [
        (lambda data: data[:-20000], "database disk image is malformed"),
        (lambda data: data[:5000] + b"\xff" * 4096 + data[9096:], "malformed"),
        (lambda data: b"not a store" * 100, "file is not a database"),
    ],
    ids=["truncated", "pages overwritten", "not sqlite"],
)
def test_a_damaged_store_is_named_with_what_to_do_and_left_as_it_is(tmp_path, damage, problem):
    store = tmp_path / "metadata.sqlite"
    write_store(store)
    damaged = damage(store.read_bytes())
    store.write_bytes(damaged)
    with pytest.raises(DamagedMetadataError) as error:
        check_metadata_store(store)
    message = str(error.value)
    assert message.startswith(f"{store} is damaged (") and problem in message
    assert f"move it aside (mv {store} {store}.damaged)" in message
    assert store.read_bytes() == damaged
