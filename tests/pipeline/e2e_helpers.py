"""Reading a finished run back: eval examples, the served model, ML Metadata."""

from __future__ import annotations

import pathlib

import numpy as np
import tensorflow as tf
from ml_metadata.metadata_store import metadata_store
from tfx.orchestration import metadata

from tpu_pipeline.common.config import PipelineConfig


def split_files(config: PipelineConfig, split: str) -> list[str]:
    """The newest ExampleGen output files of `split` (whichever ExampleGen the format uses)."""
    (example_gen,) = [p for p in config.pipeline_root.iterdir() if p.name.endswith("ExampleGen")]
    examples = sorted((example_gen / "examples").iterdir(), key=lambda p: int(p.name))[-1]
    return sorted(str(path) for path in (examples / f"Split-{split}").iterdir())


def run_fn_args(config: PipelineConfig, run_dir: pathlib.Path) -> dict:
    """FnArgs fields (as JSON-able values) for training `config` again on a finished run's data.

    The model goes to `run_dir/serving`, logs to `run_dir/model_run/1`.
    """
    from tpu_pipeline.common.config import ServingConfig
    from tpu_pipeline.components.contract import trainer_sections
    from tpu_pipeline.pipeline.wiring.graph import code_version

    transform_dir = sorted((config.pipeline_root / "Transform" / "transform_graph").iterdir())[-1]
    return {
        "train_files": split_files(config, "train"),
        "eval_files": split_files(config, "eval"),
        "transform_graph_path": str(transform_dir),
        "serving_model_dir": str(run_dir / "serving"),
        "model_run_dir": str(run_dir / "model_run" / "1"),
        "train_steps": config.trainer.train_steps,
        "eval_steps": None,
        # No TFLite variants: these tests are about training.
        "custom_config": trainer_sections(
            config.model_copy(update={"serving": ServingConfig(tflite_variants=())}),
            code_version(config),
        ),
    }


def eval_answers(saved_model_dir: str | pathlib.Path, config: PipelineConfig):
    """(probabilities [n, classes], labels [n]) of a SavedModel's serving signature on the
    eval split's serialized examples."""
    records = [
        record.numpy()
        for record in tf.data.TFRecordDataset(split_files(config, "eval"), compression_type="GZIP")
    ]
    labels = np.array(
        [
            tf.train.Example.FromString(record)
            .features.feature[config.dataset.label_feature]
            .int64_list.value[0]
            for record in records
        ]
    )
    serve = tf.saved_model.load(str(saved_model_dir)).signatures["serving_default"]
    return serve(examples=tf.constant(records))["probabilities"].numpy(), labels


def serving_accuracy(saved_model_dir: str | pathlib.Path, config: PipelineConfig) -> float:
    """Accuracy of a SavedModel's serving signature on the eval split's serialized examples."""
    probabilities, labels = eval_answers(saved_model_dir, config)
    return float((probabilities.argmax(axis=1) == labels).mean())


def mlmd_store(config: PipelineConfig) -> metadata_store.MetadataStore:
    return metadata_store.MetadataStore(
        metadata.sqlite_metadata_connection_config(str(config.metadata_path))
    )


def executions_of(store: metadata_store.MetadataStore, config: PipelineConfig, node_id: str):
    context = store.get_context_by_type_and_name("node", f"{config.full_pipeline_name}.{node_id}")
    return sorted(store.get_executions_by_context(context.id), key=lambda e: e.id)


def input_artifact_ids(
    store: metadata_store.MetadataStore, execution_id: int, key: str
) -> list[int]:
    return [
        event.artifact_id
        for event in store.get_events_by_execution_ids([execution_id])
        # One event lists every input key an artifact fills (a model can be both
        # the candidate and the baseline), in no fixed order.
        if event.type == event.INPUT and key in {step.key for step in event.path.steps}
    ]


def served_models(store: metadata_store.MetadataStore, config: PipelineConfig) -> list:
    """The Models the ServingPackager made: the ones the Evaluator judged and the Pusher
    published (the Trainer's own Model beside each is never blessed)."""
    made = {
        event.artifact_id
        for execution in executions_of(store, config, "ServingPackager")
        for event in store.get_events_by_execution_ids([execution.id])
        if event.type == event.OUTPUT
    }
    return store.get_artifacts_by_id(sorted(made))
