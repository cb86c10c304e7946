"""Folders that appear whole or not at all, and never replace an existing one.

The folder's files are synced before the rename and the parent after it, as
`common/atomic_file.py` does for one file, so a power cut cannot leave a named
folder whose files are empty.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import tempfile
from collections.abc import Iterator

from tpu_pipeline.common.atomic_file import fsync_path


@contextlib.contextmanager
def new_folder(destination: pathlib.Path) -> Iterator[pathlib.Path]:
    """Yields a hidden temporary folder next to `destination`, renamed to it on success.

    On any error the temporary folder is removed, so a failed write leaves
    nothing behind; an existing `destination` is never touched.

    Raises:
      FileExistsError: `destination` exists (before or after the writing).
    """
    if destination.exists():
        raise FileExistsError(f"{destination} exists; refusing to overwrite it")
    destination.parent.mkdir(parents=True, exist_ok=True)
    partial = pathlib.Path(tempfile.mkdtemp(prefix=f".{destination.name}.", dir=destination.parent))
    try:
        yield partial
        _fsync_tree(partial)
        if destination.exists():  # os.rename would replace an empty folder made meanwhile
            raise FileExistsError(f"{destination} appeared while writing; refusing to overwrite it")
        os.rename(partial, destination)
        fsync_path(destination.parent)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def _fsync_tree(folder: pathlib.Path) -> None:
    """Every file and folder under `folder`, deepest first, then `folder` itself."""
    for parent, _, names in os.walk(folder, topdown=False):
        for name in names:
            fsync_path(os.path.join(parent, name))
        fsync_path(parent)
