"""A run folder's history as `runs` reads it from ML Metadata, on records made as TFX makes them.

What a whole run shows is tested on real runs (tests/cli/test_runs_command.py); here, the
cases a few real runs do not reach: a run from before runs noted anything, a version a
rollback set aside, a model a person blessed after its run.
"""

from __future__ import annotations

import datetime
import json

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from tests.pipeline.mlmd_records import PIPELINE, record_execution, sqlite_connection
from tpu_pipeline.pipeline.runs.history import (
    RUN_CONFIG_PROPERTY,
    RUN_INPUTS_PROPERTY,
    RUN_SUMMARY_PROPERTY,
    read_history,
)
from tpu_pipeline.pipeline.runs.text import history_lines

COMPLETE = metadata_store_pb2.Execution.COMPLETE


def output(store, execution, key: str, type_name: str, uri: str, **properties):
    """Records an output artifact of `execution` under `key`, with custom properties."""
    type_id = store.put_artifact_type(metadata_store_pb2.ArtifactType(name=type_name))
    artifact = metadata_store_pb2.Artifact(type_id=type_id, uri=uri)
    for name, value in properties.items():
        field = "int_value" if isinstance(value, int) else "string_value"
        setattr(artifact.custom_properties[name], field, value)
    [artifact.id] = store.put_artifacts([artifact])
    event = metadata_store_pb2.Event(
        artifact_id=artifact.id,
        execution_id=execution.id,
        type=metadata_store_pb2.Event.OUTPUT,
        path=metadata_store_pb2.Event.Path(steps=[{"key": key}]),
    )
    store.put_events([event])
    return artifact


def note(store, run: str, **notes) -> None:
    context = store.get_context_by_type_and_name("pipeline_run", run)
    for name, value in notes.items():
        context.custom_properties[name].string_value = value
    store.put_contexts([context])


def two_runs(tmp_path):
    """A folder whose first run predates the notes and pushed 100; the second, noted, pushed 200,
    which a rollback then set aside; its model a person blessed by hand as well."""
    store = metadata_store.MetadataStore(sqlite_connection(tmp_path))
    store.put_contexts(
        [
            metadata_store_pb2.Context(
                type_id=store.put_context_type(metadata_store_pb2.ContextType(name="pipeline")),
                name=PIPELINE,
            )
        ]
    )
    models = {}
    for run, version in (("run-1", "100"), ("run-2", "200")):
        example_gen = record_execution(store, "ExampleGen", run=run)
        output(store, example_gen, "examples", "Examples", f"/x/{run}", span=int(version) // 100)
        trainer = record_execution(store, "Trainer", run=run)
        trainer.custom_properties["custom_config"].string_value = json.dumps(
            {"dataset": {"name": "digits"}, "trainer": {"epochs": 3}, "code_version": "c-" + run}
        )
        store.put_executions([trainer])
        models[run] = output(store, trainer, "model", "Model", f"/models/{run}")
        evaluator = record_execution(store, "Evaluator", run=run)
        output(store, evaluator, "blessing", "ModelBlessing", f"/b/{run}", blessed=0)
        pusher = record_execution(store, "Pusher", run=run)
        destination = str(tmp_path / "serving_model" / version)
        output(
            store,
            pusher,
            "pushed_model",
            "PushedModel",
            f"/p/{run}",
            pushed=1,
            pushed_destination=destination,
        )
    summary = {
        "succeeded": True,
        "blessed": False,
        "blessing_reason": "accuracy too low",
        "metrics": {"accuracy": 0.8},
        "baseline_metrics": {"accuracy": 0.9},
    }
    note(
        store,
        "run-2",
        **{
            RUN_CONFIG_PROPERTY: json.dumps(
                {"trainer": {"epochs": 5}, "dataset": {"name": "digits"}}
            ),
            RUN_SUMMARY_PROPERTY: json.dumps(summary),
            RUN_INPUTS_PROPERTY: json.dumps({"inputs": "i2", "data": "d2", "files": 3}),
        },
    )
    # A person blessed run-2's model after the run, as pipeline/manual_blessing.py records it:
    # an execution of the pipeline's context, in no pipeline run.
    kind = store.put_execution_type(metadata_store_pb2.ExecutionType(name="ManualBlessing"))
    [blessing_by_hand] = store.put_executions(
        [metadata_store_pb2.Execution(type_id=kind, last_known_state=COMPLETE)]
    )
    output(
        store,
        metadata_store_pb2.Execution(id=blessing_by_hand),
        "blessing",
        "ModelBlessing",
        "/b/hand",
        blessed=1,
        current_model_id=models["run-2"].id,
        manual_blessing_reason="good enough for the demo",
        manual_blessed_by="ana@host",
    )
    # Then a rollback set version 200 aside (components/serving/versions.py's note).
    aside = tmp_path / "serving_model" / ".rolled_back"
    (aside / "200").mkdir(parents=True)
    (tmp_path / "serving_model" / "100").mkdir()
    when = datetime.datetime(2026, 12, 5, 14, 0, tzinfo=datetime.timezone.utc)
    (aside / "200.json").write_text(json.dumps({"action": "rollback", "when": when.isoformat()}))
    return models


def test_runs_are_listed_newest_first_each_with_what_ml_metadata_and_its_notes_hold(tmp_path):
    models = two_runs(tmp_path)
    history = read_history(tmp_path)
    assert history.pipeline == PIPELINE
    second, first = history.runs
    assert (second.number, second.run_id, first.run_id) == (1, "run-2", "run-1")
    assert second.statuses == {
        n: "executed" for n in ("ExampleGen", "Trainer", "Evaluator", "Pusher")
    }
    assert (second.span, second.model_id, second.code_version) == (2, models["run-2"].id, "c-run-2")
    assert second.accuracy == 0.8 and second.baseline_accuracy == 0.9
    assert second.inputs["data"] == "d2" and second.pushed_version == "200"
    assert not second.config_is_partial and second.config["trainer"]["epochs"] == 5


def test_a_run_from_before_the_notes_shows_what_its_trainer_received(tmp_path):
    two_runs(tmp_path)
    first = read_history(tmp_path).find("run-1")
    assert first.config_is_partial and first.config == {
        "dataset": {"name": "digits"},
        "trainer": {"epochs": 3},
    }
    assert first.summary is None and first.accuracy is None
    assert first.blessed is False  # from the Evaluator's blessing artifact
    lines = history_lines(read_history(tmp_path))
    assert "    config: since #2 (dataset and trainer only): trainer.epochs: 3 -> 5" in lines


def test_a_version_is_served_until_the_next_push_or_until_a_rollback_set_it_aside(tmp_path):
    two_runs(tmp_path)
    history = read_history(tmp_path)
    first, second = history.versions["100"], history.versions["200"]
    assert first.until == second.pushed_at and first.why_until == "a newer push"
    assert (
        second.until
        == datetime.datetime(2026, 12, 5, 14, 0, tzinfo=datetime.timezone.utc).timestamp()
    )
    assert second.why_until == "rollback"


def test_a_model_blessed_by_hand_after_its_run_is_listed_blessed_and_says_by_whom(tmp_path):
    two_runs(tmp_path)
    run = read_history(tmp_path).find("run-2")
    assert run.blessed and run.blessed_by_hand == "ana@host: good enough for the demo"
    lines = history_lines(read_history(tmp_path))
    assert (
        "    blessed: yes, by hand (ana@host: good enough for the demo; the Evaluator refused: "
        "accuracy too low)"
    ) in lines
