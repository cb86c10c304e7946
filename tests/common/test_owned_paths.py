"""A path a user names keeps every file the product did not write, locally and on `gs://`."""

from __future__ import annotations

import json
import subprocess
import sys

import portalocker
import pytest

from tests.components.object_store import object_store  # noqa: F401 (a fixture)
from tpu_pipeline.common import owned_paths
from tpu_pipeline.common.owned_paths import (
    MARKER,
    UserPathError,
    check_claimable,
    check_replaceable,
    claim_folder,
    owned_file,
    write_owned,
)


def test_a_new_file_is_written_and_rewritten_because_the_marker_lists_it(tmp_path):
    path = tmp_path / "out" / "p.json"

    write_owned(path, "first", "--output")
    write_owned(path, "second", "--output")

    assert path.read_text() == "second"
    listed = json.loads((tmp_path / "out" / MARKER).read_text())["files"]
    assert list(listed) == ["p.json"] and len(listed["p.json"]) == 1


def test_a_users_file_is_refused_in_one_line_and_left_as_it_was(tmp_path):
    users = tmp_path / "notes.txt"
    users.write_text("mine")

    with pytest.raises(UserPathError) as refused:
        write_owned(users, "ours", "--summary-json")

    assert users.read_text() == "mine"
    assert str(refused.value) == (
        f"--summary-json {users}: the file exists and tpu-pipeline did not write it; "
        "name a new file or move that one away"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_a_file_we_wrote_that_the_user_then_edited_is_theirs(tmp_path):
    path = tmp_path / "summary.json"
    write_owned(path, "ours", "--summary-json")
    path.write_text("edited by hand")

    with pytest.raises(UserPathError):
        write_owned(path, "ours again", "--summary-json")

    assert path.read_text() == "edited by hand"


def test_a_users_file_that_appears_while_writing_is_kept(tmp_path):
    path = tmp_path / "p.csv"

    with pytest.raises(UserPathError), owned_file(path, "--output") as partial:
        open(partial, "w").write("ours")
        path.write_text("the user's, saved meanwhile")

    assert path.read_text() == "the user's, saved meanwhile"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.csv"]


def test_a_folder_named_as_a_file_is_refused(tmp_path):
    with pytest.raises(UserPathError, match="is a folder; name a file"):
        write_owned(tmp_path, "x", "--output")


def _write_killed_at_the_rename(path, content: str, of_the_marker: bool) -> None:
    """Runs `write_owned(path, content)` in a process killed (-9) as it renames the marker
    into place (`of_the_marker`) or the file."""
    script = (
        "import os, signal, common.owned_paths as o\n"
        "real = os.replace\n"
        "def die_there(source, target):\n"
        f"    if target.endswith(o.MARKER) != {of_the_marker}: return real(source, target)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "os.replace = die_there\n"
        f"o.write_owned({str(path)!r}, {content!r}, '--summary-json')\n"
    )
    killed = subprocess.run([sys.executable, "-c", script], check=False)
    assert killed.returncode == -9


def test_a_writer_killed_between_the_marker_and_the_rename_leaves_a_file_we_may_replace(
    tmp_path,
):
    """kill -9 inside the write: whichever content is on disk, the marker recognises it."""
    path = tmp_path / "s.json"
    write_owned(path, "old", "--summary-json")

    _write_killed_at_the_rename(path, "new", of_the_marker=False)
    assert path.read_text() == "old"
    write_owned(path, "after", "--summary-json")

    assert path.read_text() == "after"


def test_a_writer_killed_while_replacing_the_marker_leaves_the_old_marker_whole(tmp_path):
    """kill -9 as the marker itself is replaced: the old list stays, every file still ours."""
    write_owned(tmp_path / "s.json", "old", "--summary-json")
    before = (tmp_path / MARKER).read_text()

    _write_killed_at_the_rename(tmp_path / "t.json", "new", of_the_marker=True)
    assert (tmp_path / MARKER).read_text() == before
    write_owned(tmp_path / "s.json", "after", "--summary-json")
    write_owned(tmp_path / "t.json", "after", "--summary-json")

    assert (tmp_path / "s.json").read_text() == (tmp_path / "t.json").read_text() == "after"


def test_a_non_empty_folder_without_the_marker_is_refused_and_untouched(tmp_path):
    folder = tmp_path / "photos"
    folder.mkdir()
    (folder / "cat.jpg").write_bytes(b"jpeg")

    with pytest.raises(UserPathError) as refused:
        claim_folder(folder, "--explain-dir")

    assert str(refused.value) == (
        f"--explain-dir {folder}: the folder holds files tpu-pipeline did not write; "
        "name a new or empty folder"
    )
    assert sorted(p.name for p in folder.iterdir()) == ["cat.jpg"]


def test_a_users_file_that_appears_while_an_empty_folder_is_claimed_is_refused_not_adopted(
    tmp_path, monkeypatch
):
    """Empty when looked at, a photo of the user's in it by the time the marker is written."""
    folder = tmp_path / "explained"
    folder.mkdir()
    makedirs = owned_paths.fileio.makedirs

    def makedirs_then_the_user_copies_a_photo(path):
        makedirs(path)
        (folder / "cat.jpg").write_bytes(b"jpeg")

    monkeypatch.setattr(owned_paths.fileio, "makedirs", makedirs_then_the_user_copies_a_photo)

    with pytest.raises(UserPathError, match="holds files tpu-pipeline did not write"):
        claim_folder(folder, "--explain-dir")

    assert sorted(p.name for p in folder.iterdir()) == ["cat.jpg"]  # no marker adopting it


def test_new_empty_and_marked_folders_are_claimed_and_a_users_file_added_later_stays(tmp_path):
    new, empty = tmp_path / "new", tmp_path / "empty"
    empty.mkdir()
    claim_folder(new, "--output")
    claim_folder(empty, "--output")
    write_owned(new / "report.html", "ours", "--output")
    (new / "notes.txt").write_text("the user's")

    claim_folder(new, "--output")
    write_owned(new / "report.html", "ours again", "--output")

    assert (new / MARKER).exists() and (empty / MARKER).exists()
    assert (new / "notes.txt").read_text() == "the user's"
    with pytest.raises(UserPathError):
        write_owned(new / "notes.txt", "ours", "--output")


def test_a_folder_written_before_markers_is_adopted_only_when_its_caller_recognises_it(tmp_path):
    folder = tmp_path / "report"
    folder.mkdir()
    (folder / "report.html").write_text("an earlier report")

    with pytest.raises(UserPathError):
        check_claimable(folder, "--output", adopt=lambda names: False)
    claim_folder(folder, "--output", adopt=lambda names: names == ["report.html"])
    write_owned(folder / "report.html", "the new report", "--output")

    assert (folder / "report.html").read_text() == "the new report"


def test_a_file_given_as_a_folder_is_refused(tmp_path):
    (tmp_path / "f").write_text("x")

    with pytest.raises(UserPathError, match="is a file, not a folder"):
        claim_folder(tmp_path / "f", "--explain-dir")


def test_on_an_object_store_a_users_objects_are_refused_and_ours_replaced(object_store):  # noqa: F811
    object_store.objects["gs://b/mine/photo.jpg"] = b"jpeg"
    object_store.objects["gs://b/out/p.jsonl"] = b"the user's"

    with pytest.raises(UserPathError):
        claim_folder("gs://b/mine", "--explain-dir")
    with pytest.raises(UserPathError):
        write_owned("gs://b/out/p.jsonl", b"ours", "--output")
    claim_folder("gs://b/explained", "--explain-dir")
    write_owned("gs://b/explained/maps.npz", b"one", "--explain-dir")
    write_owned("gs://b/explained/maps.npz", b"two", "--explain-dir")

    assert object_store.objects["gs://b/mine/photo.jpg"] == b"jpeg"
    assert object_store.objects["gs://b/out/p.jsonl"] == b"the user's"
    assert object_store.objects["gs://b/explained/maps.npz"] == b"two"
    assert not [key for key in object_store.objects if ".partial-" in key]


def test_the_marker_is_not_left_locked_or_half_written_by_two_writers(tmp_path):
    """Two processes writing different files into one folder: both are listed."""
    script = (
        "import sys, common.owned_paths as o\n"
        "for i in range(20):\n"
        f"    o.write_owned(os.path.join({str(tmp_path)!r}, sys.argv[1]), str(i), '--output')\n"
    )
    writers = [
        subprocess.Popen([sys.executable, "-c", "import os\n" + script, name])
        for name in ("a.json", "b.json")
    ]
    assert [writer.wait() for writer in writers] == [0, 0]

    listed = json.loads((tmp_path / MARKER).read_text())["files"]
    assert sorted(listed) == ["a.json", "b.json"]
    write_owned(tmp_path / "a.json", "again", "--output")  # each is still known as ours
    write_owned(tmp_path / "b.json", "again", "--output")
    assert (tmp_path / "a.json").read_text() == (tmp_path / "b.json").read_text() == "again"


def test_a_reader_never_sees_the_marker_half_written_while_another_process_writes(tmp_path):
    """Checking one of our files while another process keeps writing beside it never refuses it."""
    write_owned(tmp_path / "ours.json", "kept", "--output")
    script = (
        "import common.owned_paths as o\n"
        "for i in range(100):\n"
        f"    o.write_owned({str(tmp_path / 'other.json')!r}, str(i), '--output')\n"
    )
    writer = subprocess.Popen([sys.executable, "-c", script])
    checks, refused = 0, []
    while writer.poll() is None:
        checks += 1
        try:
            check_replaceable(tmp_path / "ours.json", "--output")
        except UserPathError as error:
            refused.append(str(error))

    assert writer.returncode == 0
    assert checks > 100  # the checks overlapped the writes
    assert refused == []


def test_where_a_folder_cannot_be_locked_writes_still_land_and_are_listed(tmp_path, monkeypatch):
    """NFS may refuse a lock on a folder: one writer then goes without a turn, as on gs://."""

    def refused(handle, flags):
        raise portalocker.LockException("Bad file descriptor")

    monkeypatch.setattr(owned_paths.portalocker, "lock", refused)

    claim_folder(tmp_path / "out", "--output")
    write_owned(tmp_path / "out" / "p.csv", "one", "--output")
    write_owned(tmp_path / "out" / "p.csv", "two", "--output")

    assert (tmp_path / "out" / "p.csv").read_text() == "two"
    assert sorted(json.loads((tmp_path / "out" / MARKER).read_text())["files"]) == ["p.csv"]


def test_a_first_claim_killed_while_writing_the_marker_leaves_a_folder_claimed_next_time(
    tmp_path,
):
    """kill -9 as the new folder's first marker is renamed into place: only its scratch is left."""
    folder = tmp_path / "explained"
    script = (
        "import os, signal, common.owned_paths as o\n"
        "def die(source, target): os.kill(os.getpid(), signal.SIGKILL)\n"
        "os.replace = die\n"
        f"o.claim_folder({str(folder)!r}, '--explain-dir')\n"
    )
    assert subprocess.run([sys.executable, "-c", script], check=False).returncode == -9
    assert not (folder / MARKER).exists() and list(folder.iterdir())  # its scratch folder

    claim_folder(folder, "--explain-dir")
    write_owned(folder / "maps.npz", "ours", "--explain-dir")

    assert json.loads((folder / MARKER).read_text())["files"].keys() == {"maps.npz"}
