"""Progress lines: one per component as LocalDagRunner reports it, epochs indented."""

import io
import logging

from pipeline.local_runner import ComponentProgress
from pipeline.run_record import NodeRecord


class FakeRecord:
    def __init__(self, statuses):
        self.statuses = statuses

    def node(self, node_id):
        return NodeRecord(self.statuses[node_id], {})


def log(handler, message, *args):
    handler.handle(logging.LogRecord("absl", logging.INFO, __file__, 1, message, args, None))


def test_each_finished_component_prints_its_position_status_and_time():
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
    assert lines[0].startswith("[ 1/3] ExampleGen") and "cached" in lines[0]
    assert lines[1] == "        epoch 1/2: loss=0.5"
    assert lines[2].startswith("[ 2/3] Trainer") and "executed" in lines[2]
    assert len(lines) == 3
    statuses = [(r.id, r.status) for r in progress.all_results()]
    assert statuses == [("ExampleGen", "cached"), ("Trainer", "executed"), ("Pusher", "skipped")]


def test_the_component_running_when_the_run_raised_is_marked_failed():
    out = io.StringIO()
    progress = ComponentProgress(["DataGate", "Trainer"], FakeRecord({}), out)
    log(progress, "Component %s is running.", "DataGate")
    progress.finish_failed()
    assert [(r.id, r.status) for r in progress.all_results()] == [
        ("DataGate", "failed"),
        ("Trainer", "skipped"),
    ]
    assert "failed" in out.getvalue()
