"""The live status line: a running clock on a terminal, plain lines in logs and pipes."""

import io
import time

from tpu_pipeline.pipeline.local import progress
from tpu_pipeline.pipeline.local.progress import LiveStatus


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_off_a_terminal_the_start_and_occasional_updates_are_plain_lines(monkeypatch):
    out = io.StringIO()
    status = LiveStatus(out)
    status.start("[ 1/2] StatisticsGen  running")
    status.update("300 records")  # too soon after the start for another line
    monkeypatch.setattr(progress, "PLAIN_UPDATE_SECONDS", 0.0)
    status.update("600 records")
    status.print("[ 1/2] StatisticsGen  executed")
    status.stop()
    lines = out.getvalue().splitlines()
    assert lines[0] == "[ 1/2] StatisticsGen  running"
    assert lines[1].startswith("600 records (") and lines[1].endswith(" s)")
    assert lines[2] == "[ 1/2] StatisticsGen  executed"
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()


def test_on_a_terminal_the_line_is_redrawn_with_its_elapsed_time_and_then_removed():
    out = Terminal()
    status = LiveStatus(out)
    status.start("[ 1/2] Trainer  running")
    time.sleep(0.6)  # a few of rich's redraws (4 a second)
    status.print("        epoch 1/6: loss=0.5")
    status.stop()
    shown = out.getvalue()
    redraws = [part for part in shown.split("\r") if "Trainer  running" in part]
    assert len(redraws) >= 2
    assert any(part.rstrip().endswith(" s") for part in redraws)
    assert "        epoch 1/6: loss=0.5\n" in shown
    assert shown.endswith("\x1b[?25h") or "\x1b[2K" in shown.rsplit("epoch", 1)[1]


def test_a_terminal_shared_with_library_logs_gets_plain_lines():
    out = Terminal()
    status = LiveStatus(out, live=False)  # --verbose: the logs go to the same terminal
    status.start("[ 1/2] Trainer  running")
    status.stop()
    assert out.getvalue() == "[ 1/2] Trainer  running\n"
