"""The run folder's memory file gives a later report the figures of the run it names, only."""

from __future__ import annotations

from tpu_pipeline.common.memory_meter import HIGH_WATER_MARK, SAMPLED, MemoryPeak
from tpu_pipeline.pipeline.local.run_memory import MEMORY_FILE, read_run_memory, write_run_memory
from tpu_pipeline.pipeline.results.run_summary import ComponentResult

TRAINER = MemoryPeak(2_000_000_000, HIGH_WATER_MARK, None, {"CPU:0": 400_000_000})
PUSHER = MemoryPeak(1_500_000_000, SAMPLED, 700_000_000, None)


def _results() -> list[ComponentResult]:
    trainer, pusher = (
        ComponentResult("Trainer", "executed", 30.0),
        ComponentResult("Pusher", "failed", 2.0),
    )
    trainer.add_memory(TRAINER)
    pusher.add_memory(PUSHER)
    return [trainer, pusher, ComponentResult("Evaluator", "skipped", 0.0)]


def test_the_figures_written_for_a_run_read_back_for_that_run(tmp_path):
    write_run_memory(tmp_path, "2026-12-02T05:00:00", _results())
    assert read_run_memory(tmp_path, "2026-12-02T05:00:00") == {
        "Trainer": TRAINER,
        "Pusher": PUSHER,
    }


def test_another_runs_figures_or_none_at_all_read_as_nothing(tmp_path):
    assert read_run_memory(tmp_path, "any") == {}  # a run folder from before memory was kept
    write_run_memory(tmp_path, "older-run", _results())
    assert read_run_memory(tmp_path, "newest-run") == {}
    (tmp_path / MEMORY_FILE).write_text('{"run_id": "newest-run", "compo')
    assert read_run_memory(tmp_path, "newest-run") == {}
