"""After a rollback TFX's own baseline resolution picks the model served again."""

from __future__ import annotations

import shutil

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2
from tfx.dsl.input_resolution.strategies.latest_blessed_model_strategy import (
    LatestBlessedModelStrategy,
)
from tfx.orchestration import metadata
from tfx.orchestration.portable.input_resolution import channel_resolver
from tfx.proto.orchestration import pipeline_pb2

from tests.components.serving.test_publish import Clock, save_model
from tpu_pipeline.components.serving.publish import push_model_version
from tpu_pipeline.serving_ops.local.baseline import follow_serving_folder
from tpu_pipeline.serving_ops.local.folder import restore, rollback

PIPELINE = "tpu-pipeline-digits"
LIVE = metadata_store_pb2.Artifact.LIVE


def output_event(key: str) -> metadata_store_pb2.Event:
    event = metadata_store_pb2.Event(type=metadata_store_pb2.Event.OUTPUT)
    event.path.steps.add().key = key
    return event


def store_with_two_blessed_models(tmp_path, path=None, serving=None):
    """An MLMD store as two blessed, pushed runs leave it; returns it and the model ids.

    The store is `path` (default: tmp_path/metadata.sqlite), the versions 100 and 101 are
    pushed to `serving` (default: tmp_path/serving).
    """
    path = path or tmp_path / "metadata.sqlite"
    serving = serving or tmp_path / "serving"
    path.parent.mkdir(parents=True, exist_ok=True)
    store = metadata_store.MetadataStore(metadata.sqlite_metadata_connection_config(str(path)))
    model_type = store.put_artifact_type(metadata_store_pb2.ArtifactType(name="Model"))
    blessing_type = store.put_artifact_type(metadata_store_pb2.ArtifactType(name="ModelBlessing"))
    context_type = store.put_context_type(metadata_store_pb2.ContextType(name="pipeline"))
    context = metadata_store_pb2.Context(type_id=context_type, name=PIPELINE)
    execution_type = store.put_execution_type(metadata_store_pb2.ExecutionType(name="Trainer"))
    model_ids = []
    for i in range(2):
        uri = tmp_path / f"Trainer/model/{i}"
        shutil.copytree(save_model(tmp_path / f"saved-{i}", float(i)), uri / "Format-Serving")
        push_model_version(str(uri / "Format-Serving"), str(serving), Clock(100 + i))
        [model_id] = store.put_artifacts(
            [metadata_store_pb2.Artifact(type_id=model_type, uri=str(uri), state=LIVE)]
        )
        model = store.get_artifacts_by_id([model_id])[0]
        blessing = metadata_store_pb2.Artifact(type_id=blessing_type, state=LIVE)
        blessing.custom_properties["blessed"].int_value = 1
        blessing.custom_properties["current_model_id"].int_value = model_id
        # Resolvers find the outputs of executions in the pipeline's context.
        _, _, [context.id] = store.put_execution(
            metadata_store_pb2.Execution(type_id=execution_type),
            [(model, output_event("model")), (blessing, output_event("blessing"))],
            [context],
        )
        model_ids.append(model_id)
    return path, model_ids


def baseline(path) -> int:
    """The model TFX's resolver node would hand the Evaluator as its baseline."""
    handle = metadata.Metadata(metadata.sqlite_metadata_connection_config(str(path)))
    resolved = {}
    with handle:
        for key, type_name in (("model", "Model"), ("model_blessing", "ModelBlessing")):
            channel = pipeline_pb2.InputSpec.Channel()
            query = channel.context_queries.add()
            query.type.name = "pipeline"
            query.name.field_value.string_value = PIPELINE
            channel.artifact_query.type.name = type_name
            resolved[key] = channel_resolver.resolve_single_channel(handle, channel)
        result = LatestBlessedModelStrategy().resolve_artifacts(handle.store, resolved)
    return result["model"][0].id


def test_rollback_moves_the_baseline_to_the_served_model_and_restore_moves_it_back(tmp_path):
    path, (older, newer) = store_with_two_blessed_models(tmp_path)
    serving = str(tmp_path / "serving")
    assert baseline(path) == newer

    rollback(serving, "bad")
    changed = follow_serving_folder(path, PIPELINE, serving)

    assert len(changed["withdrawn"]) == 1 and baseline(path) == older
    assert follow_serving_folder(path, PIPELINE, serving) == {"withdrawn": [], "reinstated": []}
    restore(serving, "101")
    assert len(follow_serving_folder(path, PIPELINE, serving)["reinstated"]) == 1
    assert baseline(path) == newer
