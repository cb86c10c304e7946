"""The real pipeline, end to end on real digits: train, bless, push, rerun from cache."""

from __future__ import annotations

import io
import json
import pathlib

import pytest
from ml_metadata.proto import metadata_store_pb2

from components.serving.publish import pushed_versions
from components.serving.warmup import read_warmup_requests
from pipeline.local_runner import run_local
from tests.conftest import small_digits_config
from tests.pipeline.e2e_helpers import (
    executions_of,
    input_artifact_ids,
    mlmd_store,
    serving_accuracy,
)

pytestmark = pytest.mark.slow

CACHED_ON_RERUN = [
    "ExampleGen",
    "ImportSchemaGen",
    "StatisticsGen",
    "ExampleValidator",
    "DataGate",
    "Transform",
    "Trainer",
]


def test_first_run_blesses_and_pushes_a_model_that_serves_raw_examples(digits_run):
    config, summary = digits_run
    assert summary.blessed, summary.blessing_reason
    assert summary.metrics["accuracy"] >= 0.95
    assert [c.status for c in summary.components] == ["executed"] * 10
    pushed = pathlib.Path(summary.pushed_model)
    assert pushed.parent == config.serving_dir and pushed.name.isdigit()
    assert serving_accuracy(pushed, config) >= 0.95
    # A model server answered every signature before the push, and said so.
    assert "serving check: passed (serving_default, images, pixels in " in summary.to_text()
    assert [r.model_spec.signature_name for r in read_warmup_requests(str(pushed))] == [
        "serving_default",
        "images",
        "pixels",
    ]


def test_pushed_model_records_how_it_was_trained(digits_run):
    config, summary = digits_run
    info = json.loads(
        (pathlib.Path(summary.pushed_model) / "assets.extra" / "training_info.json").read_text()
    )
    assert info["device"] == "cpu" and info["num_replicas"] == 1
    assert info["jit_compile"] is False and info["precision"] == "float32"
    assert info["global_batch_size"] == config.trainer.per_replica_batch_size
    assert summary.trainer == info


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    config = small_digits_config(tmp_path_factory.mktemp("rerun"))
    first = run_local(config, io.StringIO())
    second = run_local(config, io.StringIO())
    assert first.succeeded and second.succeeded, (first.error, second.error)
    return config, first, second


def test_second_run_is_cached_up_to_the_trainer(two_runs):
    config, _, second = two_runs
    statuses = {c.id: c.status for c in second.components}
    assert [statuses[node] for node in CACHED_ON_RERUN] == ["cached"] * len(CACHED_ON_RERUN)
    store = mlmd_store(config)
    trainer_runs = executions_of(store, config, "Trainer")
    assert [e.last_known_state for e in trainer_runs] == [
        metadata_store_pb2.Execution.COMPLETE,
        metadata_store_pb2.Execution.CACHED,
    ]
    # Executions double; the model artifact does not.
    assert len(store.get_artifacts_by_type("Model")) == 1


def test_second_run_evaluates_against_the_first_blessed_model(two_runs):
    config, first, second = two_runs
    store = mlmd_store(config)
    model_id = store.get_artifacts_by_type("Model")[0].id
    evaluations = executions_of(store, config, "Evaluator")
    assert input_artifact_ids(store, evaluations[0].id, "baseline_model") == []
    assert input_artifact_ids(store, evaluations[1].id, "baseline_model") == [model_id]
    assert second.baseline_metrics["accuracy"] == pytest.approx(first.metrics["accuracy"])
    assert "against the last blessed model" in second.blessing_reason


def test_second_run_does_not_push_the_same_model_again(two_runs):
    config, first, second = two_runs
    assert pushed_versions(str(config.serving_dir)) == [pathlib.Path(first.pushed_model).name]
    assert second.pushed_model == first.pushed_model
    assert second.push_note == "already served; not pushed again"
    assert second.serving_check == "not run: the model is already served"


def test_mnist_runs_end_to_end_above_ninety_percent(tmp_path):
    config = small_digits_config(tmp_path, dataset="mnist", **{"trainer.train_steps": 600})
    summary = run_local(config, io.StringIO())
    assert summary.succeeded, summary.error
    assert summary.metrics["accuracy"] >= 0.90
    assert summary.blessed and summary.pushed_model
