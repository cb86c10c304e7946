"""A small search on real digits through the `tpu-pipeline` command: tune, train, rerun cached."""

from __future__ import annotations

import json
import pathlib
import re

import pytest
import yaml

from tests.conftest import run_cli
from tests.pipeline.report.page_claims import false_sentences, read_page
from tpu_pipeline.cli.main import main
from tpu_pipeline.pipeline.report.collect import collect_report

pytestmark = pytest.mark.slow

SEARCH_SPACE = {
    "learning_rate": {"values": [0.002, 0.005]},  # the default and a faster one
    "per_replica_batch_size": {"values": [32, 64]},
    "dropout": {"min": 0.2, "max": 0.4},
}
# Untuned and tuned runs differ by this much from run to run on 347 eval digits.
ACCURACY_NOISE = 0.03


@pytest.fixture(scope="module")
def tuned_runs(tmp_path_factory, digits_run):
    """Two CLI runs of the digits pipeline with a 3-trial random search, on digits_run's data."""
    untuned_config, untuned = digits_run
    out = tmp_path_factory.mktemp("tuned")
    config_file = out / "tuned.yaml"
    config_file.write_text(
        yaml.safe_dump(
            {
                "trainer": {  # the untuned run's schedule, so only the search differs
                    "train_steps": untuned_config.trainer.train_steps,
                    "epochs": untuned_config.trainer.epochs,
                },
                "tuner": {
                    "enabled": True,
                    "max_trials": 3,
                    "trial_steps": 30,
                    "search_space": SEARCH_SPACE,
                },
            }
        )
    )
    runs = []
    for name in ("first", "second"):
        summary_json = out / f"{name}.json"
        result = run_cli(
            "run", "--config", str(config_file), "--output-dir", str(out),
            "--summary-json", str(summary_json),
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr
        # Trial lines are progress (stderr); the tuning line is a result (stdout).
        runs.append((result.stderr + result.stdout, json.loads(summary_json.read_text())))
    return untuned, runs, out / f"{untuned_config.pipeline_name}-digits"


def _status(summary: dict, node: str) -> str:
    return next(c["status"] for c in summary["components"] if c["id"] == node)


def test_search_records_every_trial_and_the_trainer_trains_with_the_best(tuned_runs):
    _, [(progress, summary), _], _ = tuned_runs
    tuning = summary["tuning"]
    assert _status(summary, "Tuner") == "executed" and tuning["objective"] == "val_accuracy"
    assert len(tuning["trials"]) == 3
    for trial in tuning["trials"]:
        assert trial["status"] == "COMPLETED" and set(trial["hyperparameters"]) == set(SEARCH_SPACE)
        assert 0 < trial["value"] <= 1 and trial["seconds"] > 0
        # One TensorBoard run per trial: Keras's train/validation scalars.
        for split in ("train", "validation"):
            assert list((pathlib.Path(trial["log_dir"]) / split).glob("events.out.tfevents.*"))
        assert f"trial {trial['trial_id']}: val_accuracy=" in progress
    best = max(tuning["trials"], key=lambda t: t["value"])
    assert tuning["chosen_trial_id"] == best["trial_id"]
    assert tuning["chosen_hyperparameters"] == best["hyperparameters"]
    # The Trainer trained with the chosen values, as its exported model records.
    assert summary["trainer"]["hyperparameters"] == best["hyperparameters"]
    batch = best["hyperparameters"]["per_replica_batch_size"]
    assert summary["trainer"]["global_batch_size"] == batch
    assert f"chose trial {best['trial_id']}" in progress


def test_tuned_model_is_blessed_and_at_least_as_accurate_as_the_untuned_default(tuned_runs):
    untuned, [(_, summary), _], _ = tuned_runs
    assert summary["blessed"], summary["blessing_reason"]
    assert summary["metrics"]["accuracy"] >= untuned.metrics["accuracy"] - ACCURACY_NOISE


def test_a_rerun_with_the_same_data_code_and_search_space_does_not_search_again(tuned_runs):
    _, [(_, first), (progress, second)], _ = tuned_runs
    assert _status(second, "Tuner") == "cached" and _status(second, "Trainer") == "cached"
    assert not re.search(r"^\s+trial \S+: ", progress, re.MULTILINE)  # no trial ran
    assert second["tuning"] == first["tuning"]  # the cached search is still reported


def test_report_and_tensorboard_show_every_trial(tuned_runs, capsys):
    _, [_, (_, summary)], run_dir = tuned_runs
    trials = summary["tuning"]["trials"]
    report = (run_dir / "report" / "report.html").read_text()
    assert 'id="trials"' in report
    assert f"<td>{summary['tuning']['chosen_trial_id']} (chosen)</td>" in report
    assert report.count("<td>COMPLETED</td>") == len(trials)
    assert false_sentences(read_page(report), collect_report(run_dir), "tuning") == []

    assert main(["tensorboard", str(run_dir)]) == 0
    command = capsys.readouterr().out.strip()
    trials_dir = pathlib.Path(trials[0]["log_dir"]).parent
    assert command.startswith("tensorboard --logdir_spec trainer:")
    assert command.endswith(f",tuner:{trials_dir}")  # one TensorBoard run per trial folder
