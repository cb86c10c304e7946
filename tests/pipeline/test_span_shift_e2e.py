"""Each new span: retrained from the served model, and its images compared with the served
model's: quiet for more digits, loud for inverted ones (held back from the push with
`--fail-on-drift`), through the real pipeline and the command a scheduler runs.

Vertex AI runs the same pipeline on each schedule tick; what a tick does (read the newest
span, start from the last blessed model, push only a model that is not worse) is the same
locally, so it is tested here on the spans' own runs.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
import tensorflow as tf
from sklearn.datasets import load_digits

from tests.conftest import run_cli, small_digits_config
from tests.pipeline.e2e_helpers import mlmd_store
from tpu_pipeline.cli.main import main
from tpu_pipeline.pipeline.local.runner import run_local
from tpu_pipeline.pipeline.results.run_message import run_message
from tpu_pipeline.pipeline.results.run_record import custom_property

pytestmark = pytest.mark.slow

SETTINGS = {
    "dataset.file_pattern": "span-{SPAN}/*.tfrecord",
    "trainer.train_steps": 20,
    "trainer.epochs": 1,
    "trainer.warm_start": True,  # as a scheduled retraining starts: from the served model
    "evaluator.accuracy_lower_bound": 0.0,  # every model blessed: there is a served model
    "evaluator.max_accuracy_drop": 1.0,
    "serving.tflite_variants": [],
    "explain.mistakes": 0,
    "explain.correct_per_class": 0,
}


def write_span(path, pixels: np.ndarray, labels: np.ndarray) -> None:
    path.parent.mkdir(parents=True)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for image, label in zip(pixels, labels, strict=True):
            features = {
                "pixels": tf.train.Feature(float_list=tf.train.FloatList(value=image)),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
            }
            writer.write(
                tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()
            )


@pytest.fixture(scope="module")
def spans(tmp_path_factory):
    """Span 1: half the digits; span 2: the other half; span 3: that half inverted (16 - v,
    same labels, values the schema allows). Returns (config, data dir, runs 1 and 2)."""
    root = tmp_path_factory.mktemp("spans")
    digits = load_digits()
    pixels, labels = digits.data.astype(np.float32), digits.target
    data_dir = root / "data"
    config = small_digits_config(root / "out", **{"dataset.data_dir": str(data_dir), **SETTINGS})
    write_span(data_dir / "span-1" / "d.tfrecord", pixels[::2], labels[::2])
    first = run_local(config, io.StringIO())
    write_span(data_dir / "span-2" / "d.tfrecord", pixels[1::2], labels[1::2])
    second = run_local(config, io.StringIO())
    write_span(data_dir / "span-3" / "d.tfrecord", 16 - pixels[1::2], labels[1::2])
    return config, root, first, second


def test_the_first_span_has_no_served_model_to_compare_with(spans):
    _, _, first, _ = spans
    assert first.succeeded and first.blessed, first.error
    assert first.span_shift is None
    assert "span shift" not in first.to_text()


def test_the_next_span_retrains_warm_started_against_the_first_spans_model(spans):
    config, _, first, second = spans
    assert first.push_note == "new version"
    assert first.trainer["warm_started"] is False  # nothing blessed yet to start from
    assert first.baseline_metrics is None
    # The second run picked up the new span by itself, started from span 1's model and
    # was compared with it.
    examples = sorted(mlmd_store(config).get_artifacts_by_type("Examples"), key=lambda a: a.id)
    assert [custom_property(a, "span") for a in examples] == [1, 2]
    assert second.succeeded and second.trainer["warm_started"] is True
    assert second.baseline_metrics is not None
    # Pushed exactly when the Evaluator found it not worse than the baseline.
    assert (second.push_note == "new version") == second.blessed
    pushed = sorted(p.name for p in config.serving_dir.iterdir() if p.name.isdigit())
    assert len(pushed) == (2 if second.blessed else 1)


def test_a_fresh_sample_of_the_same_digits_is_no_shift(spans):
    _, _, _, second = spans
    assert second.succeeded, second.error
    assert second.span_shift["checked"] and not second.span_shift["shifted"]
    assert {s["signal"] for s in second.span_shift["signals"]} == {
        "brightness",
        "contrast",
        "sharpness",
    }
    print(second.span_shift["headline"])
    assert second.span_shift["headline"].startswith("span shift: none in 3 signals of ")
    assert second.span_shift["headline"] in second.to_text()
    assert "span shift" not in json.dumps(run_message(second, None))  # nothing to tell


def test_inverted_digits_are_held_back_before_the_pusher_with_exit_3(spans):
    """`--fail-on-drift` (drift.block_push): the SpanShiftGate judges the span before the
    Pusher, which publishes nothing; the shift is on stderr, in the summary and the exit code."""
    config, root, _, _ = spans
    served_before = sorted(p.name for p in config.serving_dir.iterdir())
    summary_path = root / "third.json"
    settings = {**SETTINGS, "dataset.data_dir": config.dataset.data_dir}
    args = ["run", "--summary-json", str(summary_path), "--fail-on-drift"]
    args += ["--set", f"output_dir={config.output_dir}"]
    for name, value in settings.items():
        args += ["--set", f"{name}={json.dumps(value) if isinstance(value, list) else value}"]
    result = run_cli(*args, timeout=900)

    assert result.returncode == 3, result.stdout[-2000:] + result.stderr[-3000:]
    summary = json.loads(summary_path.read_text())
    assert summary["succeeded"] and summary["span_shift"]["shifted"]
    moved = {s["signal"] for s in summary["span_shift"]["signals"] if s["shifted"]}
    assert "brightness" in moved
    headline = summary["span_shift"]["headline"]
    print(headline)
    assert headline.startswith("span shift: ") and "brightness" in headline
    assert headline in result.stderr.splitlines()  # one line on stderr
    assert headline in result.stdout.splitlines()
    # The gate ran as a step of the pipeline, before the Pusher, and nothing was published.
    ran = [c["id"] for c in summary["components"]]
    assert ran.index("SpanShiftGate") < ran.index("Pusher")
    assert "SpanShiftGate" in result.stderr  # its progress line
    assert summary["pushed_model"] is None
    assert summary["push_note"].startswith("held back by drift.block_push: ")
    assert sorted(p.name for p in config.serving_dir.iterdir()) == served_before
    assert f"pushed: nothing ({summary['push_note']})" in result.stdout.splitlines()
    # Refused by the Evaluator too, so it is never the baseline: the scheduler's next tick on
    # the same span compares it with the served model again, and holds it back again (it
    # was compared with the held-back model, found no shift and pushed it).
    assert not summary["blessed"] and summary["push_note"] in summary["blessing_reason"]
    gated = config.model_copy(
        update={"drift": config.drift.model_copy(update={"block_push": True})}
    )
    next_tick = run_local(gated, io.StringIO())
    assert next_tick.succeeded and next_tick.span_shifted, next_tick.error
    assert not next_tick.blessed and next_tick.pushed_model is None
    assert next_tick.push_note.startswith("held back by drift.block_push: ")
    assert sorted(p.name for p in config.serving_dir.iterdir()) == served_before
    # Looked at and accepted by a person: blessed by hand, it is published after all.
    bless = ["serving", "bless", "--reason", "the inversion is the new normal"]
    assert main([*bless, *args[args.index("--fail-on-drift") + 1 :]]) == 0
    assert len([p for p in config.serving_dir.iterdir() if p.name.isdigit()]) == (
        len([name for name in served_before if name.isdigit()]) + 1
    )
