"""Progress lines: each component's start and end as LocalDagRunner reports them, epochs indented.

The output here is not a terminal, so lines are plain (tests/pipeline/test_progress.py
covers the live line).
"""

import io
import logging

from tpu_pipeline.common.memory_meter import HIGH_WATER_MARK, SAMPLED, MemoryPeak
from tpu_pipeline.pipeline.local.runner import ComponentProgress, _served_model_made
from tpu_pipeline.pipeline.results.run_record import NodeRecord
from tpu_pipeline.pipeline.results.run_summary import ComponentResult

MB = 1024 * 1024


class FakeRecord:
    def __init__(self, statuses):
        self.statuses = statuses

    def node(self, node_id):
        return NodeRecord(self.statuses[node_id], {})


def log(handler, message, *args):
    handler.handle(logging.LogRecord("absl", logging.INFO, __file__, 1, message, args, None))


def test_each_component_prints_its_start_then_its_position_status_and_time():
    out = io.StringIO()
    progress = ComponentProgress(
        ["ExampleGen", "Trainer", "Pusher"],
        FakeRecord({"ExampleGen": "cached", "Trainer": "executed"}),
        out,
    )
    log(progress, "Component %s is running.", "ExampleGen")
    log(progress, "Component %s is finished.", "ExampleGen")
    log(progress, "Component %s is running.", "Trainer")
    log(progress, "epoch %d/%d: %s", 1, 2, "loss=0.5")
    log(progress, "some other library line")
    log(progress, "Component %s is finished.", "Trainer")
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["[", "1/3]", "ExampleGen", "running"]
    assert lines[1].startswith("[ 1/3] ExampleGen") and "cached" in lines[1]
    assert lines[2].split() == ["[", "2/3]", "Trainer", "running"]
    assert lines[3] == "        epoch 1/2: loss=0.5"
    assert lines[4].startswith("[ 2/3] Trainer") and "executed" in lines[4]
    assert len(lines) == 5
    statuses = [(r.id, r.status) for r in progress.all_results()]
    assert statuses == [("ExampleGen", "cached"), ("Trainer", "executed"), ("Pusher", "skipped")]


def test_the_component_running_when_the_run_stopped_gets_the_runs_outcome():
    out = io.StringIO()
    progress = ComponentProgress(["DataGate", "Trainer"], FakeRecord({}), out)
    log(progress, "Component %s is running.", "DataGate")
    progress.finish("interrupted")
    progress.close()
    assert [(r.id, r.status) for r in progress.all_results()] == [
        ("DataGate", "interrupted"),
        ("Trainer", "skipped"),
    ]
    assert out.getvalue().splitlines()[-1].split()[:4] == ["[", "1/2]", "DataGate", "interrupted"]


def test_a_component_run_earlier_in_the_command_is_not_shown_again_when_cached():
    # ExampleGen ran alone before a schema was bootstrapped; the whole run then reuses it.
    out = io.StringIO()
    record = FakeRecord({"ExampleGen": "executed", "Trainer": "executed"})
    progress = ComponentProgress(["ExampleGen", "Trainer"], record, out)
    log(progress, "Component %s is running.", "ExampleGen")
    log(progress, "Component %s is finished.", "ExampleGen")
    record.statuses["ExampleGen"] = "cached"
    log(progress, "Component %s is running.", "ExampleGen")
    log(progress, "Component %s is finished.", "ExampleGen")
    log(progress, "Component %s is running.", "Trainer")
    log(progress, "Component %s is finished.", "Trainer")

    lines = out.getvalue().splitlines()
    assert [line.split()[:3] for line in lines] == [
        ["[", "1/2]", "ExampleGen"],
        ["[", "1/2]", "ExampleGen"],
        ["[", "2/2]", "Trainer"],
        ["[", "2/2]", "Trainer"],
    ]
    assert "executed" in lines[1]
    assert [(r.id, r.status) for r in progress.all_results()] == [
        ("ExampleGen", "executed"),
        ("Trainer", "executed"),
    ]


def test_a_component_that_runs_again_without_the_cache_is_shown_again():
    out = io.StringIO()
    progress = ComponentProgress(["ExampleGen"], FakeRecord({"ExampleGen": "executed"}), out)
    for _ in range(2):
        log(progress, "Component %s is running.", "ExampleGen")
        log(progress, "Component %s is finished.", "ExampleGen")

    results = [line for line in out.getvalue().splitlines() if "executed" in line]
    assert len(results) == 2 and all(line.startswith("[ 1/1] ExampleGen") for line in results)


def test_examplegens_notices_about_odd_data_are_shown_indented():
    out = io.StringIO()
    progress = ComponentProgress(["ExampleGen"], FakeRecord({"ExampleGen": "executed"}), out)
    log(progress, "Component %s is running.", "ExampleGen")
    log(progress, "data: %s", "every input is a test file (t10k-images-idx3-ubyte.gz): ...")
    log(progress, "Component %s is finished.", "ExampleGen")
    lines = out.getvalue().splitlines()
    assert lines[1] == "        data: every input is a test file (t10k-images-idx3-ubyte.gz): ..."
    assert len(lines) == 3


class ScriptedMeter:
    """Returns the given peaks, one per mark, in order."""

    def __init__(self, *peaks):
        self.peaks = iter(peaks)

    def mark(self):
        return next(self.peaks)


def test_each_component_line_and_result_carry_the_peak_memory_of_its_own_interval():
    gap = MemoryPeak(100 * MB, SAMPLED, None, None)
    example_gen = MemoryPeak(300 * MB, SAMPLED, None, None)
    trainer = MemoryPeak(1946 * MB, HIGH_WATER_MARK, 310 * MB, {"CPU:0": 400 * MB})
    out = io.StringIO()
    progress = ComponentProgress(
        ["ExampleGen", "Trainer"],
        FakeRecord({"ExampleGen": "executed", "Trainer": "executed"}),
        out,
        meter=ScriptedMeter(gap, example_gen, gap, trainer, gap),
    )
    for node in ("ExampleGen", "Trainer"):
        log(progress, "Component %s is running.", node)
        log(progress, "Component %s is finished.", node)

    lines = out.getvalue().splitlines()
    assert lines[1].endswith("   peak >=300.0 MiB")  # sampled: a lower bound
    assert lines[3].endswith("   peak 1.9 GiB, child 310.0 MiB, TF CPU:0 400.0 MiB")
    result = progress.all_results()[1]
    assert (result.peak_rss_bytes, result.peak_rss_measured) == (1946 * MB, HIGH_WATER_MARK)
    assert result.child_peak_rss_bytes == 310 * MB
    assert result.tensorflow_peak_bytes == {"CPU:0": 400 * MB}
    assert progress.run_peak() == (trainer, "Trainer")


def test_a_run_peak_reached_between_components_names_no_component():
    out = io.StringIO()
    progress = ComponentProgress(
        ["ExampleGen"],
        FakeRecord({"ExampleGen": "executed"}),
        out,
        meter=ScriptedMeter(
            MemoryPeak(900 * MB, HIGH_WATER_MARK, None, None),
            MemoryPeak(200 * MB, SAMPLED, None, None),
            MemoryPeak(100 * MB, SAMPLED, None, None),
        ),
    )
    log(progress, "Component %s is running.", "ExampleGen")
    log(progress, "Component %s is finished.", "ExampleGen")
    peak, where = progress.run_peak()
    assert (peak.rss_bytes, where) == (900 * MB, None)


def test_without_a_meter_the_lines_and_results_carry_no_memory():
    out = io.StringIO()
    progress = ComponentProgress(["ExampleGen"], FakeRecord({"ExampleGen": "executed"}), out)
    log(progress, "Component %s is running.", "ExampleGen")
    log(progress, "Component %s is finished.", "ExampleGen")
    assert "peak" not in out.getvalue()
    assert progress.all_results()[0].peak_rss_bytes is None
    assert progress.run_peak() == (None, None)


def _made(node_id, status, component_ids):
    return _served_model_made(node_id, [ComponentResult(node_id, status, 1.0)], component_ids)


def test_the_serving_checks_server_starts_once_the_model_to_push_is_made_now():
    full = ["Trainer", "ServingPackager", "Evaluator", "Pusher"]
    assert _made("ServingPackager", "executed", full)
    assert not _made("Trainer", "executed", full)  # the packager's conversions come next
    assert not _made("ServingPackager", "cached", full)  # served already, or refused before
    assert not _made("Evaluator", "executed", full)
    without_packager = ["Trainer", "Evaluator", "Pusher"]
    assert _made("Trainer", "executed", without_packager)
    assert not _made("Trainer", "executed", ["Trainer", "ServingPackager", "Evaluator"])
