"""Each component's peak memory, kept in the run folder as it finishes, for a report made later.

ML Metadata records what a component made, not the memory it needed, and its
executions are TFX's to write. So the local runner rewrites `memory.json` in the
run folder after every component, naming the run (TFX's `pipeline_run` context),
and `tpu-pipeline report` shows the newest run's figures, even for a run whose
process died (killed for memory, say) before it printed a summary.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib

from tpu_pipeline.common import atomic_file
from tpu_pipeline.common.memory_meter import MemoryPeak
from tpu_pipeline.pipeline.results.run_summary import ComponentResult

MEMORY_FILE = "memory.json"


def write_run_memory(run_dir: pathlib.Path, run_id: str, components: list[ComponentResult]) -> None:
    """Replaces the run folder's memory file with the measured figures of `components`."""
    measured = {c.id: dataclasses.asdict(peak) for c in components if (peak := c.memory_peak())}
    record = {"run_id": run_id, "components": measured}
    atomic_file.write_text(pathlib.Path(run_dir) / MEMORY_FILE, json.dumps(record, indent=2))


def read_run_memory(run_dir: pathlib.Path, run_id: str) -> dict[str, MemoryPeak]:
    """The figures recorded for run `run_id`, by component id; empty if none were for it."""
    try:
        record = json.loads((pathlib.Path(run_dir) / MEMORY_FILE).read_text())
        if record["run_id"] != run_id:
            return {}
        return {node: MemoryPeak(**peak) for node, peak in record["components"].items()}
    except (OSError, ValueError, KeyError, TypeError):  # none (an older run), or damaged
        return {}
