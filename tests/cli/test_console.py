"""The terminal and log plumbing the commands share."""

from __future__ import annotations

import os
import re
import stat
import tempfile

from tpu_pipeline.cli.console import temp_log_file


def test_commands_started_in_the_same_second_get_a_log_file_each(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    first, second = temp_log_file("predict"), temp_log_file("predict")

    assert first != second
    for log in (first, second):
        assert log.parent == tmp_path
        assert re.fullmatch(r"tpu-pipeline-predict-\d{8}-\d{6}-\w+\.log", log.name)
        assert log.read_bytes() == b""
        assert stat.S_IMODE(os.stat(log).st_mode) == 0o600  # the job's lines are its user's
