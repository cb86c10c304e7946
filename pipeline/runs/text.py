"""`tpu-pipeline runs` and `runs diff` as lines for the terminal."""

from __future__ import annotations

import datetime
import json
from typing import Any

from tpu_pipeline.pipeline.runs.compare import Change, Flip, RunDiff, config_changes
from tpu_pipeline.pipeline.runs.history import RunEntry, RunHistory, ServedVersion

# Configuration changes shown per run in the list; `runs diff` shows them all.
SHOWN_CHANGES = 4
# Flipped examples named one by one; the rest are counted.
SHOWN_FLIPS = 10
# Per-class and per-slice changes shown, the largest first; the rest are counted.
SHOWN_BREAKDOWN = 20


def when(seconds: float | None) -> str:
    """A moment in local time, to the second."""
    if seconds is None:
        return "now"
    return datetime.datetime.fromtimestamp(seconds).strftime("%Y-%m-%d %H:%M:%S")


def value(shown: Any, measured: bool = False) -> str:
    """A configuration value as written (JSON), or a measured figure to four decimals."""
    if measured and isinstance(shown, float):
        return f"{shown:.4f}"
    if isinstance(shown, str):
        return shown
    return json.dumps(shown)


def describe_change(change: Change, measured: bool = False) -> str:
    """`name: before -> after`; a measured figure with the difference, `(+0.0123)`."""
    delta = change.delta if measured else None
    signed = f" ({delta:+.4f})" if delta is not None and isinstance(change.after, float) else ""
    before, after = value(change.before, measured), value(change.after, measured)
    return f"{change.name}: {before} -> {after}{signed}"


def _served(version: ServedVersion) -> str:
    start = f"{version.version}, served from {when(version.pushed_at)}"
    if version.until is not None:
        return f"{start} until {when(version.until)} ({version.why_until})"
    if version.why_until:  # gone from the folder, when unknown
        return f"{start}; {version.why_until}"
    return f"{start} until now"


def _data(run: RunEntry, previous: RunEntry | None) -> str:
    parts = [f"span {run.span}" if run.span is not None else "no span read"]
    inputs = run.inputs or {}
    if inputs.get("data"):
        same = previous is not None and (previous.inputs or {}).get("data") == inputs["data"]
        parts.append(
            f"data {inputs['data']} ({inputs['files']} file{'' if inputs['files'] == 1 else 's'}"
            + (f", same as #{previous.number})" if same else ")")
        )
    return ", ".join(parts)


def _config(run: RunEntry, previous: RunEntry | None) -> str:
    if run.config is None:
        return "not recorded"
    if previous is None:
        return "first run of this folder"
    if previous.config is None:
        return f"#{previous.number} recorded none to compare with"
    changes = config_changes(previous.config, run.config)
    partial = (
        " (dataset and trainer only)" if run.config_is_partial or previous.config_is_partial else ""
    )
    if not changes:
        return f"same as #{previous.number}{partial}"
    shown = "; ".join(describe_change(c) for c in changes[:SHOWN_CHANGES])
    more = f"; and {len(changes) - SHOWN_CHANGES} more" if len(changes) > SHOWN_CHANGES else ""
    return f"since #{previous.number}{partial}: {shown}{more}"


def _accuracy(run: RunEntry) -> str:
    if run.accuracy is None:
        return "not recorded" if run.statuses.get("Evaluator") else "not evaluated"
    baseline = run.baseline_accuracy
    against = f" (baseline {baseline:.4f})" if baseline is not None else " (no baseline)"
    return f"{run.accuracy:.4f}{against}"


def _blessed(run: RunEntry) -> str:
    if run.blessed_by_hand:
        refused = f"; the Evaluator refused: {run.blessing_reason}" if run.blessing_reason else ""
        return f"yes, by hand ({run.blessed_by_hand}{refused})"
    if run.blessed is None:
        return "not evaluated"
    reason = f" ({run.blessing_reason})" if run.blessing_reason else ""
    return ("yes" if run.blessed else "no") + reason


def history_lines(history: RunHistory) -> list[str]:
    """Each run, newest first: when, data, configuration changes, model, accuracy, blessing,
    and the version it served."""
    count = len(history.runs)
    lines = [
        f"{history.pipeline or 'no pipeline'} in {history.run_dir}: {count} run(s), newest first"
    ]
    for run in history.runs:
        previous = history.previous(run)
        seconds = max(run.finished - run.started, 0)
        took = f"{seconds:.0f} s, run {run.run_id}"
        lines.append(f"#{run.number}  {when(run.started)}  {run.outcome}  ({took})")
        lines.append(f"    data: {_data(run, previous)}")
        lines.append(f"    config: {_config(run, previous)}")
        if run.model_id is not None:
            lines.append(f"    model: {run.model_id} ({run.model_status}) {run.model_uri}")
        lines.append(f"    accuracy: {_accuracy(run)}")
        lines.append(f"    blessed: {_blessed(run)}")
        version = history.versions.get(run.pushed_version or "")
        if version is not None:
            note = (run.summary or {}).get("push_note")
            lines.append(f"    pushed: {_served(version)}" + (f"; {note}" if note else ""))
    return lines


def _flip_line(flip: Flip, class_names: list[str]) -> str:
    def name(label: int) -> str:
        return class_names[label] if 0 <= label < len(class_names) else str(label)

    return (
        f"    example {flip.index} ({flip.key}): {name(flip.label)}, "
        f"answered {name(flip.before)} -> {name(flip.after)}"
    )


def diff_lines(diff: RunDiff) -> list[str]:
    """What changed from the older run to the newer one, section by section."""
    older, newer = diff.older, diff.newer
    lines = [
        f"from #{older.number} ({when(older.started)}, run {older.run_id}) "
        f"to #{newer.number} ({when(newer.started)}, run {newer.run_id})"
    ]
    sections = (
        ("configuration", diff.config, False),
        ("data", diff.data, False),
        ("metrics", diff.metrics, True),
        ("per class", diff.per_class, True),
        ("per slice", diff.slices, True),
    )
    for title, changes, measured in sections:
        if not changes:
            lines.append(f"{title}: no difference")
            continue
        lines.append(f"{title}:")
        shown = changes
        if title.startswith("per ") and len(changes) > SHOWN_BREAKDOWN:
            shown = sorted(changes, key=lambda c: -abs(c.delta or 0))[:SHOWN_BREAKDOWN]
        lines += [f"  {describe_change(change, measured)}" for change in shown]
        if len(shown) < len(changes):
            lines.append(f"  and {len(changes) - len(shown)} more, each a smaller change")
    class_names = list((newer.summary or {}).get("class_names") or [])
    if diff.compared_examples is None:
        lines.append(f"examples: {diff.outcomes_note}")
        return lines
    lines.append(
        f"examples: {diff.compared_examples} eval examples in both; "
        f"{len(diff.right_to_wrong)} right -> wrong, {len(diff.wrong_to_right)} wrong -> right"
        + (f" ({diff.outcomes_note})" if diff.outcomes_note else "")
    )
    for title, flipped in (
        ("right -> wrong", diff.right_to_wrong),
        ("wrong -> right", diff.wrong_to_right),
    ):
        if flipped:
            lines.append(f"  {title}:")
            lines += [_flip_line(flip, class_names) for flip in flipped[:SHOWN_FLIPS]]
            if len(flipped) > SHOWN_FLIPS:
                lines.append(f"    and {len(flipped) - SHOWN_FLIPS} more")
    return lines
