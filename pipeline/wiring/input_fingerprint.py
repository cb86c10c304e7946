"""What a run's inputs were, so `run --if-new-data` can tell whether anything new arrived.

The fingerprint of a run is its configuration (as validated; the `notify:`,
`tracking:` and `vertex:` sections aside) and every file ExampleGen may read: each file under
the data folder that matches the dataset's patterns, span, version and date
placeholders widened to any value, by relative name, size and modification
time in nanoseconds. A new span, a
new version, a new, changed, renamed or removed file, or another
configuration gives another fingerprint. It is stricter than ExampleGen's own
fingerprint (file count, total size and whole-second times of the latest span
only), so it never skips data ExampleGen would read anew; a change in an older
span starts a run that comes from the cache.

Checking needs neither TensorFlow nor TFX (whose import alone takes 10-20 s):
the patterns are recorded with the fingerprint of the last successful run,
and another configuration (which could name other patterns) already counts as
new. The record is written atomically, only after a run that succeeded.
"""

from __future__ import annotations

import dataclasses
import datetime
import glob
import hashlib
import json
import os
import pathlib
import re

from tpu_pipeline.common.atomic_file import write_text
from tpu_pipeline.common.config import DatasetConfig, PipelineConfig

LAST_SUCCESS_FILE = "last_successful_run.json"
# ExampleGen's placeholders (tfx.components.example_gen.utils): any value matches.
_PLACEHOLDER = re.compile(r"\{(SPAN|VERSION|YYYY|MM|DD)\}")


@dataclasses.dataclass(frozen=True)
class InputFingerprint:
    """A run's configuration digest and the files it may read."""

    config: str
    data_root: str
    patterns: tuple[str, ...]
    files: dict[str, tuple[int, int]]  # relative path -> (size, mtime_ns)

    def digest(self) -> str:
        """A short digest of the whole fingerprint: two runs with the same one read the same
        configuration and the same files (names, sizes and times)."""
        text = json.dumps(dataclasses.asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def data_digest(self) -> str:
        """A short digest of the files alone (names under the data folder, sizes, times): the
        same data, whatever the configuration or where the folder is."""
        text = json.dumps([list(self.patterns), self.files], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def changes_since(self, last: InputFingerprint) -> str | None:
        """What is new since `last`, in a few words; None when nothing is."""
        if self.config != last.config:
            return "the configuration changed since the last successful run"
        if (self.data_root, self.patterns) != (last.data_root, last.patterns):
            return "the data folder or its patterns changed since the last successful run"
        changed = sorted(
            path
            for path in self.files.keys() | last.files.keys()
            if self.files.get(path) != last.files.get(path)
        )
        if not changed:
            return None
        more = f" and {len(changed) - 1} more" if len(changed) > 1 else ""
        return f"new or changed input since the last successful run: {changed[0]}{more}"


def config_digest(config: PipelineConfig) -> str:
    """A digest of what decides a local run's result (not where it notifies or is tracked, nor
    Vertex's settings)."""
    settings = config.model_dump_json(exclude={"notify", "vertex", "tracking"})
    return hashlib.sha256(settings.encode()).hexdigest()[:16]


def input_patterns(dataset: DatasetConfig) -> tuple[str, ...]:
    """The patterns ExampleGen reads, relative to the data folder (imports the format readers)."""
    from tpu_pipeline.components.example_gen.formats import file_pattern

    if dataset.split_patterns is not None:
        return tuple(dataset.split_patterns.model_dump().values())
    return (file_pattern(dataset),)


def fingerprint_inputs(
    config: PipelineConfig, data_root: pathlib.Path, patterns: tuple[str, ...]
) -> InputFingerprint:
    """The fingerprint of `config` reading `patterns` under `data_root` now."""
    files: dict[str, tuple[int, int]] = {}
    for pattern in patterns:
        for path in glob.glob(str(data_root / _PLACEHOLDER.sub("*", pattern))):
            stat = os.stat(path)
            if os.path.isfile(path):
                files[os.path.relpath(path, data_root)] = (stat.st_size, stat.st_mtime_ns)
    return InputFingerprint(config_digest(config), str(data_root), patterns, files)


def read_last_success(run_dir: pathlib.Path) -> InputFingerprint | None:
    """The fingerprint of the run folder's last successful run, or None if it has none."""
    try:
        record = json.loads((run_dir / LAST_SUCCESS_FILE).read_text())["inputs"]
        return InputFingerprint(
            record["config"],
            record["data_root"],
            tuple(record["patterns"]),
            {path: tuple(entry) for path, entry in record["files"].items()},
        )
    except (OSError, ValueError, KeyError, TypeError):  # none yet, or unreadable: run
        return None


def record_success(run_dir: pathlib.Path, fingerprint: InputFingerprint) -> None:
    """Records `fingerprint` as the last successful run's: whole or not at all."""
    finished = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    text = json.dumps({"finished": finished, "inputs": dataclasses.asdict(fingerprint)}, indent=1)
    write_text(run_dir / LAST_SUCCESS_FILE, text)


def new_inputs(config: PipelineConfig) -> str | None:
    """Why `config` should run again: what is new since its last successful run, or None.

    Uses the last run's patterns and data folder; a new configuration is new anyway.
    """
    last = read_last_success(config.run_dir)
    if last is None:
        return "no successful run in this run folder yet"
    now = fingerprint_inputs(config, pathlib.Path(last.data_root), last.patterns)
    return now.changes_since(last)
