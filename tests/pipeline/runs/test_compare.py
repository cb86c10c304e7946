"""What `runs diff` says differs between two runs: fields, metrics and the examples that flipped.

Runs are built as `history.py` reads them from ML Metadata; the outcomes are files as the
Evaluator writes them (components/serving/eval_outcomes.py), or the Trainer did in older runs.
"""

from __future__ import annotations

import dataclasses
import pathlib

from tpu_pipeline.components.serving.eval_outcomes import EVAL_OUTCOMES_FILE, EvalOutcomes
from tpu_pipeline.pipeline.runs.compare import (
    UNSET,
    Change,
    config_changes,
    diff_runs,
    flatten,
    flips,
)
from tpu_pipeline.pipeline.runs.history import RunEntry
from tpu_pipeline.pipeline.runs.text import diff_lines


def entry(number: int, model_id: int, model_run: pathlib.Path | None, **summary) -> RunEntry:
    return RunEntry(
        number=number,
        run_id=f"run-{number}",
        started=1_800_000_000.0 - number * 60,
        finished=1_800_000_030.0 - number * 60,
        statuses={"Trainer": "executed", "Evaluator": "executed"},
        config={"trainer": {"train_steps": summary.pop("steps", 300)}, "dataset": {"name": "d"}},
        config_is_partial=False,
        summary={"succeeded": True, "class_names": ["cat", "dog", "owl"], **summary},
        inputs={"inputs": "i1", "data": "d1", "files": 2, "data_root": "/data"},
        span=0,
        model_id=model_id,
        model_uri=f"/models/{model_id}",
        model_run_uri=str(model_run) if model_run else None,
        code_version="c1",
        blessed=summary.get("blessed"),
        pushed_version=None,
    )


def outcomes(folder: pathlib.Path, keys, labels, predicted) -> pathlib.Path:
    folder.mkdir(parents=True)
    written = EvalOutcomes(list(keys), list(labels), list(predicted))
    (folder / EVAL_OUTCOMES_FILE).write_text(written.to_json())
    return folder


def test_a_configuration_is_compared_field_by_field_lists_whole():
    before = {"trainer": {"epochs": 15, "model": "cnn_bn"}, "serving": {"variants": ["a", "b"]}}
    after = {
        "trainer": {"epochs": 5, "model": "cnn_bn", "dropout": 0.2},
        "serving": {"variants": ["a"]},
    }
    assert flatten(after)["trainer.dropout"] == 0.2
    assert config_changes(before, after) == [
        Change("serving.variants", ["a", "b"], ["a"]),
        Change("trainer.dropout", UNSET, 0.2),
        Change("trainer.epochs", 15, 5),
    ]
    assert config_changes(before, before) == []
    assert config_changes(None, after) == []  # a run that recorded none: nothing to say


def test_examples_are_matched_by_key_not_position():
    older = EvalOutcomes(["a", "b", "c", "d"], [0, 1, 2, 1], [0, 1, 0, 2])
    # The newer split holds b, a and d in another order, e instead of c.
    newer = EvalOutcomes(["b", "a", "e", "d"], [1, 0, 2, 1], [2, 0, 2, 1])
    compared, worse, better = flips(older, newer)
    assert compared == 3
    assert [(f.key, f.index, f.label, f.before, f.after) for f in worse] == [("b", 0, 1, 1, 2)]
    assert [(f.key, f.index, f.before, f.after) for f in better] == [("d", 3, 2, 1)]


def test_a_diff_names_what_changed_and_which_examples_flipped(tmp_path):
    older = entry(
        2,
        7,
        outcomes(tmp_path / "old", "abcd", [0, 1, 2, 1], [0, 1, 0, 2]),
        steps=300,
        metrics={"accuracy": 0.5, "example_count": 4.0},
        per_class_metrics=[{"class_name": "dog", "precision": 1.0, "recall": 0.5}],
        slices=[{"kind": "class", "value": "dog", "accuracy": 0.5}],
        blessed=False,
    )
    newer = entry(
        1,
        9,
        outcomes(tmp_path / "new", "abcd", [0, 1, 2, 1], [0, 2, 2, 1]),
        steps=600,
        metrics={"accuracy": 0.75, "example_count": 4.0},
        per_class_metrics=[{"class_name": "dog", "precision": 1.0, "recall": 0.5}],
        slices=[{"kind": "class", "value": "dog", "accuracy": 0.5}],
        blessed=True,
        pushed_model="/serving/1",
    )
    diff = diff_runs(older, newer)
    assert diff.config == [Change("trainer.train_steps", 300, 600)]
    assert diff.data == []
    assert Change("accuracy", 0.5, 0.75) in diff.metrics
    assert diff.per_class == [] and diff.slices == []
    assert (diff.compared_examples, len(diff.right_to_wrong), len(diff.wrong_to_right)) == (4, 1, 2)
    lines = diff_lines(diff)
    assert "  trainer.train_steps: 300 -> 600" in lines
    assert "  accuracy: 0.5000 -> 0.7500 (+0.2500)" in lines
    assert "  outcome: not blessed -> blessed and pushed" in lines
    assert "per class: no difference" in lines
    assert "examples: 4 eval examples in both; 1 right -> wrong, 2 wrong -> right" in lines
    assert "    example 1 (b): dog, answered dog -> owl" in lines  # class names, not numbers


def test_the_same_model_cannot_flip_and_a_run_without_outcomes_says_so(tmp_path):
    folder = outcomes(tmp_path / "run", "ab", [0, 1], [0, 0])
    same = diff_runs(entry(2, 7, folder), entry(1, 7, folder))
    assert same.compared_examples == 2 and not same.right_to_wrong and not same.wrong_to_right
    assert same.outcomes_note == "the same model (ML Metadata id 7): no example can flip"
    missing = diff_runs(entry(2, 7, None), entry(1, 8, folder))
    assert missing.compared_examples is None
    assert diff_lines(missing)[-1].startswith("examples: run #2 recorded no per-example outcomes")


def test_the_outcomes_are_read_from_the_evaluators_folder_before_an_older_trainers(tmp_path):
    # Today's runs: the Evaluator keeps them; a run from before kept them with its Trainer.
    older = entry(2, 7, outcomes(tmp_path / "model_run", "ab", [0, 1], [0, 1]))
    newer = dataclasses.replace(
        entry(1, 8, outcomes(tmp_path / "stale", "ab", [0, 1], [0, 1])),
        evaluation_uri=str(outcomes(tmp_path / "evaluation", "ab", [0, 1], [1, 1])),
    )
    diff = diff_runs(older, newer)
    assert (diff.compared_examples, len(diff.right_to_wrong), len(diff.wrong_to_right)) == (2, 1, 0)
