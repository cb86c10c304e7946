"""What differs between two runs: configuration, data, metrics, and the examples that flipped.

Both runs are `RunEntry`s read from ML Metadata (`history.py`); the metrics come from
the summaries the runs noted, the per-example outcomes from the files their Evaluators
wrote (`components/serving/eval_outcomes.py`; their Trainers, in older runs). An example
is compared only when both runs measured it, matched by its key (its stored image and
label), not its position.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from tpu_pipeline.components.serving.eval_outcomes import EvalOutcomes, read_eval_outcomes
from tpu_pipeline.pipeline.runs.history import RunEntry

# Stands for a field one configuration has and the other has not.
UNSET = "(unset)"


@dataclasses.dataclass(frozen=True)
class Change:
    """One field, value or metric that differs: its name, and its value in each run."""

    name: str
    before: Any
    after: Any

    @property
    def delta(self) -> float | None:
        """after - before, for two numbers; else None."""
        numbers = all(
            isinstance(v, (int, float)) and not isinstance(v, bool)
            for v in (self.before, self.after)
        )
        return self.after - self.before if numbers else None


@dataclasses.dataclass(frozen=True)
class Flip:
    """An eval example one run got right and the other wrong."""

    key: str
    index: int  # its position in the newer run's eval split (as measured)
    label: int
    before: int  # the older run's answer
    after: int  # the newer run's answer


@dataclasses.dataclass
class RunDiff:
    """Everything that differs from `older` to `newer`."""

    older: RunEntry
    newer: RunEntry
    config: list[Change]
    data: list[Change]
    metrics: list[Change]
    per_class: list[Change]
    slices: list[Change]
    compared_examples: int | None  # None: a run recorded no outcomes (`outcomes_note` says why)
    right_to_wrong: list[Flip]
    wrong_to_right: list[Flip]
    outcomes_note: str


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """A nested configuration as `section.field` -> value; lists stay whole values."""
    if not isinstance(tree, dict):
        return {prefix: tree}
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict) and value:
            flat.update(flatten(value, name))
        else:
            flat[name] = value
    return flat


def config_changes(before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[Change]:
    """Each configuration field whose value differs, in field order; [] if either is unknown."""
    if before is None or after is None:
        return []
    old, new = flatten(before), flatten(after)
    return [
        Change(name, old.get(name, UNSET), new.get(name, UNSET))
        for name in sorted(old.keys() | new.keys())
        if json.dumps(old.get(name, UNSET)) != json.dumps(new.get(name, UNSET))
    ]


def _changes(before: dict[str, Any], after: dict[str, Any]) -> list[Change]:
    return [
        Change(name, before.get(name), after.get(name))
        for name in sorted(before.keys() | after.keys(), key=lambda n: (n not in after, n))
        if before.get(name) != after.get(name)
    ]


def _data_facts(run: RunEntry) -> dict[str, Any]:
    inputs = run.inputs or {}
    return {
        "span": run.span,
        "data fingerprint": inputs.get("data"),
        "input files": inputs.get("files"),
        "data folder": inputs.get("data_root"),
    }


def _overall(run: RunEntry) -> dict[str, Any]:
    summary = run.summary or {}
    facts: dict[str, Any] = {
        name: value for name, value in run.metrics.items() if name != "sparse_categorical_accuracy"
    }
    calibration = summary.get("calibration")
    if calibration:
        facts["calibration error"] = calibration["expected_calibration_error"]
    facts["blessed"] = run.blessed
    facts["outcome"] = run.outcome
    return facts


def _per_class(run: RunEntry) -> dict[str, Any]:
    facts = {}
    for c in (run.summary or {}).get("per_class_metrics") or []:
        for metric in ("precision", "recall"):
            facts[f"{c['class_name']} {metric}"] = c[metric]
    return facts


def _slices(run: RunEntry) -> dict[str, Any]:
    return {
        f"{s['kind']}={s['value']} accuracy": s["accuracy"]
        for s in (run.summary or {}).get("slices") or []
    }


def _outcomes(run: RunEntry) -> EvalOutcomes | None:
    """The run's Evaluator's outcomes, else those its Trainer wrote before the Evaluator did."""
    for folder in (run.evaluation_uri, run.model_run_uri):
        outcomes = read_eval_outcomes(folder) if folder else None
        if outcomes is not None:
            return outcomes
    return None


def flips(older: EvalOutcomes, newer: EvalOutcomes) -> tuple[int, list[Flip], list[Flip]]:
    """How many examples both measured, and those that went right -> wrong and wrong -> right."""
    before = {key: predicted for key, predicted in zip(older.keys, older.predicted, strict=True)}
    compared, worse, better = 0, [], []
    for index, (key, label, predicted) in enumerate(
        zip(newer.keys, newer.labels, newer.predicted, strict=True)
    ):
        if key not in before:
            continue
        compared += 1
        flip = Flip(key, index, label, before[key], predicted)
        if before[key] == label and predicted != label:
            worse.append(flip)
        elif before[key] != label and predicted == label:
            better.append(flip)
    return compared, worse, better


def diff_runs(older: RunEntry, newer: RunEntry) -> RunDiff:
    """What changed from `older` to `newer`."""
    old_outcomes, new_outcomes = _outcomes(older), _outcomes(newer)
    compared, worse, better, note = None, [], [], ""
    if old_outcomes is None or new_outcomes is None:
        missing = [
            f"#{r.number}" for r, o in ((older, old_outcomes), (newer, new_outcomes)) if not o
        ]
        note = (
            f"run {' and '.join(missing)} recorded no per-example outcomes (it stopped before "
            "its Trainer finished, or ran before they were recorded)"
        )
    else:
        compared, worse, better = flips(old_outcomes, new_outcomes)
        if older.model_id is not None and older.model_id == newer.model_id:
            note = f"the same model (ML Metadata id {newer.model_id}): no example can flip"
        elif compared == 0:
            note = "no eval example is in both runs (other data)"
    return RunDiff(
        older=older,
        newer=newer,
        config=config_changes(older.config, newer.config),
        data=_changes(_data_facts(older), _data_facts(newer)),
        metrics=_changes(_overall(older), _overall(newer)),
        per_class=_changes(_per_class(older), _per_class(newer)),
        slices=_changes(_slices(older), _slices(newer)),
        compared_examples=compared,
        right_to_wrong=worse,
        wrong_to_right=better,
        outcomes_note=note,
    )
