"""The output's extension picks its format; a failed job never touches the old file."""

from __future__ import annotations

import pytest

from tpu_pipeline.common.atomic_file import replaced_when_done
from tpu_pipeline.common.config import ConfigError
from tpu_pipeline.pipeline.batch_predict.outputs import output_extension


def test_the_extension_names_the_format_and_others_are_refused():
    assert output_extension("out/Predictions.JSONL") == ".jsonl"
    with pytest.raises(ConfigError, match=r"--output p\.txt: .*\.csv, \.jsonl, \.tfrecord"):
        output_extension("p.txt")


def test_the_output_is_replaced_once_written_and_kept_when_the_job_fails(tmp_path):
    output = tmp_path / "predictions.csv"
    output.write_text("old")
    with pytest.raises(RuntimeError):
        with replaced_when_done(str(output)) as partial:
            with open(partial, "w") as handle:
                handle.write("half")
            raise RuntimeError("the job failed")
    assert output.read_text() == "old"
    with replaced_when_done(str(output)) as partial:
        with open(partial, "w") as handle:
            handle.write("new")
        assert output.read_text() == "old"  # not before the block ends
    assert output.read_text() == "new"
    assert [path.name for path in tmp_path.iterdir()] == ["predictions.csv"]  # nothing aside
