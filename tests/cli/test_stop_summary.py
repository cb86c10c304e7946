"""A run that stops before any component still writes its summary JSON, with the error."""

from __future__ import annotations

import dataclasses
import json

from tpu_pipeline.cli.main import EXIT_BAD_CONFIG, EXIT_DATA_REJECTED, main
from tpu_pipeline.cli.stop_summary import stop_summary
from tpu_pipeline.common.config import ConfigError
from tpu_pipeline.pipeline.results.run_summary import RunSummary


def test_the_stop_summary_has_every_field_of_a_run_summary():
    fields = {field.name for field in dataclasses.fields(RunSummary)}

    assert set(stop_summary("p", ConfigError("bad"), None)) == fields


def test_a_bad_configuration_writes_the_summary_json_with_the_error(tmp_path, capfd):
    summary_path = tmp_path / "out" / "summary.json"

    code = main(["run", "--set", "trainer.epochs=0", "--summary-json", str(summary_path)])

    _, err = capfd.readouterr()
    summary = json.loads(summary_path.read_text())
    assert code == EXIT_BAD_CONFIG
    assert summary["succeeded"] is False and summary["error"].startswith("ConfigError: ")
    assert "trainer.epochs" in summary["error"] and "trainer.epochs" in err


def test_a_missing_data_folder_writes_the_summary_json_as_data_rejected(tmp_path, capfd):
    summary_path = tmp_path / "summary.json"

    code = main(
        [
            "run",
            "--dataset",
            "mnist",
            "--data-dir",
            str(tmp_path / "nowhere"),
            "--output-dir",
            str(tmp_path / "out"),
            "--summary-json",
            str(summary_path),
        ]
    )

    summary = json.loads(summary_path.read_text())
    assert code == EXIT_DATA_REJECTED
    assert summary["data_rejected"] is True and str(tmp_path / "nowhere") in summary["error"]
