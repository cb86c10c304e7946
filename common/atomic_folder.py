"""Folders that appear whole or not at all, and never replace an existing one."""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import tempfile
from collections.abc import Iterator


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
        if destination.exists():  # os.rename would replace an empty folder made meanwhile
            raise FileExistsError(f"{destination} appeared while writing; refusing to overwrite it")
        os.rename(partial, destination)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
