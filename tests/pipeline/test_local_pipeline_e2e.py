"""The real pipeline, end to end on real digits: train, bless, push, rerun from cache."""

from __future__ import annotations

import io
import json
import pathlib
import shutil

import psutil
import pytest
from ml_metadata.proto import metadata_store_pb2

from tests.conftest import small_digits_config
from tests.pipeline.e2e_helpers import (
    executions_of,
    input_artifact_ids,
    mlmd_store,
    served_models,
    serving_accuracy,
)
from tpu_pipeline.components.device.policy import cpu_precision
from tpu_pipeline.components.serving import server_check
from tpu_pipeline.components.serving.eval_outcomes import read_eval_outcomes
from tpu_pipeline.components.serving.publish import pushed_versions
from tpu_pipeline.components.serving.warmup import read_warmup_requests
from tpu_pipeline.pipeline.local.runner import run_local

pytestmark = pytest.mark.slow

CACHED_ON_RERUN = [
    "ExampleGen",
    "ImportSchemaGen",
    "StatisticsGen",
    "ExampleValidator",
    "DataGate",
    "Transform",
    "Trainer",
    "ServingPackager",
    "Explainer",
]


def test_first_run_blesses_and_pushes_a_model_that_serves_raw_examples(digits_run):
    config, summary = digits_run
    assert summary.blessed, summary.blessing_reason
    assert summary.metrics["accuracy"] >= 0.95
    assert [c.status for c in summary.components] == ["executed"] * 12
    # What is made from the trained model is its own step, timed and measured on its own.
    ids = [c.id for c in summary.components]
    assert ids.index("Trainer") < ids.index("ServingPackager") < ids.index("Evaluator")
    assert "Explainer" in ids
    # Each component's peak memory was measured, and the run's is the largest of them.
    assert all(c.peak_rss_bytes > 0 for c in summary.components)
    assert summary.peak_rss_bytes >= max(c.peak_rss_bytes for c in summary.components)
    # The serving check's model server is a child of the Pusher's: its own peak counts there.
    assert next(c for c in summary.components if c.id == "Pusher").child_peak_rss_bytes > 0
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
    # What analyses the trained model runs after the Trainer: the ServingPackager writes the
    # warmup requests, the Evaluator keeps each eval example's outcome beside TFMA's output.
    root = config.pipeline_root
    assert not list(root.glob("Trainer/model/*/Format-Serving/assets.extra/*warmup*"))
    assert not list(root.glob("Trainer/model_run/*/eval_outcomes.json"))
    (evaluation,) = root.glob("Evaluator/evaluation/*")
    assert read_eval_outcomes(str(evaluation)).examples > 0


def test_pushed_model_records_how_it_was_trained(digits_run):
    config, summary = digits_run
    info = json.loads(
        (pathlib.Path(summary.pushed_model) / "assets.extra" / "training_info.json").read_text()
    )
    assert info["device"] == "cpu" and info["num_replicas"] == 1
    # float32, or bfloat16 on a CPU that computes it (components/device/policy.py)
    assert info["jit_compile"] is False and info["precision"] == cpu_precision()
    assert info["global_batch_size"] == config.trainer.per_replica_batch_size
    assert summary.trainer == info


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    # No TFLite variants: these tests are about caching and the baseline (digits_run checks them).
    config = small_digits_config(
        tmp_path_factory.mktemp("rerun"), **{"serving.tflite_variants": []}
    )
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
    # Executions double; the model artifacts (the Trainer's, the ServingPackager's) do not.
    assert len(store.get_artifacts_by_type("Model")) == 2
    packager_runs = executions_of(store, config, "ServingPackager")
    assert [e.last_known_state for e in packager_runs] == [
        metadata_store_pb2.Execution.COMPLETE,
        metadata_store_pb2.Execution.CACHED,
    ]


def test_second_run_evaluates_against_the_first_blessed_model(two_runs):
    config, first, second = two_runs
    store = mlmd_store(config)
    evaluations = executions_of(store, config, "Evaluator")
    # The model evaluated, blessed and served is the ServingPackager's, made from the Trainer's.
    (model_id,) = input_artifact_ids(store, evaluations[0].id, "model")
    (packager_run,) = executions_of(store, config, "ServingPackager")[:1]
    made = store.get_events_by_execution_ids([packager_run.id])
    assert model_id in [e.artifact_id for e in made if e.type == e.OUTPUT]
    assert input_artifact_ids(store, evaluations[0].id, "baseline_model") == []
    assert input_artifact_ids(store, evaluations[1].id, "baseline_model") == [model_id]
    assert second.baseline_metrics["accuracy"] == pytest.approx(first.metrics["accuracy"])
    assert "not significantly worse than the last blessed model" in second.blessing_reason
    # The same model against itself: no example only one of the two got right.
    compared = second.baseline_comparison
    assert (compared.candidate_right_only, compared.baseline_right_only) == (0, 0)
    assert compared.examples == second.metrics["example_count"] and compared.p_value == 1.0


def test_second_run_does_not_push_the_same_model_again(two_runs):
    config, first, second = two_runs
    assert pushed_versions(str(config.serving_dir)) == [pathlib.Path(first.pushed_model).name]
    assert second.pushed_model == first.pushed_model
    assert second.push_note == "already served; not pushed again"
    assert second.serving_check == "not run: the model is already served"
    # The first run's check names the server that ran it (not installed here: the Python one).
    assert first.serving_check.startswith("passed (")
    assert first.serving_check_server == (
        "tensorflow_model_server" if shutil.which("tensorflow_model_server") else "model_server.py"
    )
    assert second.serving_check_server is None
    # The Python server started while the Evaluator ran (pipeline/local/runner.py).
    if first.serving_check_server == "model_server.py":
        assert ", started ahead up in " in first.serving_check
    # The version keeps the card of the run that pushed it: the first run's evaluation.
    assert second.model_card == first.model_card
    store = mlmd_store(config)
    first_evaluation = executions_of(store, config, "Pusher")[0]
    (evaluation_id,) = input_artifact_ids(store, first_evaluation.id, "evaluation")
    card = json.loads(pathlib.Path(first.model_card).read_text())
    assert f"ModelEvaluation {evaluation_id} at" in card["model_details"]["documentation"]


def test_mnist_runs_end_to_end_above_ninety_percent(tmp_path):
    config = small_digits_config(  # its subject is accuracy: no TFLite variants to measure
        tmp_path, dataset="mnist", **{"trainer.train_steps": 120, "serving.tflite_variants": []}
    )
    summary = run_local(config, io.StringIO())
    assert summary.succeeded, summary.error
    assert summary.metrics["accuracy"] >= 0.90
    assert summary.blessed and summary.pushed_model


def _model_servers_started_here() -> list[psutil.Process]:
    """The serving check's Python servers this process started that still run."""
    return [
        child
        for child in psutil.Process().children()
        if child.is_running()
        and child.status() != psutil.STATUS_ZOMBIE
        and server_check.PYTHON_SERVER_MODULE in child.cmdline()
    ]


@pytest.fixture(scope="module")
def blessed_by_hand(tmp_path_factory):
    """A run the Evaluator refuses (every class must be perfect), blessed by hand through
    the CLI, then a second run."""
    from tpu_pipeline.cli.main import main

    output_dir = tmp_path_factory.mktemp("manual-blessing")
    unreachable = {"evaluator.slice_accuracy_lower_bounds": {"class": 1.0}}
    config = small_digits_config(output_dir, **unreachable)
    refused = run_local(config, io.StringIO())
    assert refused.succeeded and not refused.blessed, refused.error
    # The server started ahead for a push that did not come is stopped with the run.
    assert _model_servers_started_here() == []
    flags = [
        "--output-dir",
        str(output_dir),
        "--set",
        "evaluator.slice_accuracy_lower_bounds={class: 1.0}",
    ]
    bless = ["serving", "bless", "--reason", "accepted for the demo", *flags]
    codes = [main(bless), main(bless)]  # the second finds it blessed already
    second = run_local(config, io.StringIO())
    assert second.succeeded, second.error
    return config, refused, codes, second


def test_a_manual_blessing_is_recorded_in_mlmd_and_pushes_the_refused_model(blessed_by_hand):
    config, refused, codes, _ = blessed_by_hand
    assert refused.pushed_model is None and codes == [0, 1]
    # Refused for the classes it missed, each named, though the whole split cleared 0.9.
    assert refused.metrics["accuracy"] >= 0.9
    missed = [s for s in refused.slices if s.accuracy < 1.0]
    assert missed and set(refused.blessing_reason.split("; ")) == {
        f"accuracy on class={s.value} {s.accuracy:.4f} is below the lower bound 1.0000"
        for s in missed
    }
    store = mlmd_store(config)
    (model,) = served_models(store, config)  # what was evaluated, refused, then blessed
    blessings = [
        b
        for b in store.get_artifacts_by_type("ModelBlessing")
        if b.custom_properties["current_model_id"].int_value == model.id
    ]
    by_hand = [b for b in blessings if "manual_blessing_reason" in b.custom_properties]
    # Both Evaluator runs refused the model; the one blessing by hand stands beside them.
    assert sorted(b.custom_properties["blessed"].int_value for b in blessings) == [0, 0, 1]
    assert len(by_hand) == 1 and by_hand[0].custom_properties["blessed"].int_value == 1
    assert by_hand[0].custom_properties["manual_blessing_reason"].string_value == (
        "accepted for the demo"
    )
    (manual,) = store.get_executions_by_type("ManualBlessing")
    assert input_artifact_ids(store, manual.id, "model") == [model.id]
    (version,) = pushed_versions(str(config.serving_dir))
    assert serving_accuracy(config.serving_dir / version, config) >= 0.95
    # Its model card says who blessed it, why, and what the Evaluator had said.
    card = json.loads((config.serving_dir / version / "model_card.json").read_text())
    documentation = card["model_details"]["documentation"]
    assert ", by hand (tpu-pipeline serving bless): accepted for the demo (the Evaluator " in (
        documentation
    )
    assert missed[0].value in documentation and "is below the lower bound 1.0000" in documentation
    assert f"Model {model.id} at {model.uri}" in documentation
    assert card["model_details"]["version"]["name"] == version


def test_the_next_run_takes_the_manually_blessed_model_as_its_baseline(blessed_by_hand):
    config, _, _, second = blessed_by_hand
    store = mlmd_store(config)
    (model,) = served_models(store, config)
    evaluations = executions_of(store, config, "Evaluator")
    assert input_artifact_ids(store, evaluations[0].id, "baseline_model") == []
    assert input_artifact_ids(store, evaluations[1].id, "baseline_model") == [model.id]
    assert second.blessed and second.manual_blessing["reason"] == "accepted for the demo"
    assert second.blessing_reason.startswith("blessed by hand by ")
    assert "the Evaluator refused" in second.blessing_reason
    assert second.push_note == "pushed by the manual blessing"
    # The report `serving bless` wrote says so too.
    assert "blessed by hand" in (config.run_dir / "report" / "report.html").read_text()


def test_serving_list_shows_the_accuracy_and_the_manual_blessing(blessed_by_hand, capsys):
    from tpu_pipeline.cli.main import main

    config, _, _, _ = blessed_by_hand
    assert main(["serving", "list", "--output-dir", str(config.output_dir)]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert "SERVING  (accuracy 0." in line
    assert "blessed by hand by " in line and "accepted for the demo" in line
