"""Wires the TFX components; the same definition runs locally and on Vertex AI.

User code is referenced by dotted path into this installed package, so nothing
is uploaded or packaged per run, and the compiled pipeline is the same on every
machine. Components are imported from their own modules, not `tfx.v1`, which
would also import the Vertex AI SDK (~8 s) on every local run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pathlib
from typing import Any

from ml_metadata.proto import metadata_store_pb2

from tpu_pipeline import components
from tpu_pipeline.common.config import DatasetConfig, PipelineConfig
from tpu_pipeline.common.tfx_api import (
    BaseComponent,
    Channel,
    ExampleValidator,
    ImportSchemaGen,
    LatestBlessedModelStrategy,
    Pusher,
    Resolver,
    StatisticsGen,
    Trainer,
    Transform,
    data_types,
    example_gen_pb2,
    pusher_pb2,
    standard_artifacts,
    tfx_pipeline,
    trainer_pb2,
    tuner_pb2,
)
from tpu_pipeline.components.contract import (
    component_sections,
    evaluator_sections,
    explainer_sections,
    packager_sections,
    pusher_sections,
    trainer_sections,
    tuner_sections,
)
from tpu_pipeline.components.data_checks.label_drift import PreviousSpanStatistics
from tpu_pipeline.components.data_gate import DataGate
from tpu_pipeline.components.evaluation.eval_config import build_eval_config
from tpu_pipeline.components.evaluator import JudgingEvaluator
from tpu_pipeline.components.example_gen.factory import build_example_gen
from tpu_pipeline.components.example_gen.formats import file_pattern, source_format
from tpu_pipeline.components.explain.maps import require_grad_cam_layer
from tpu_pipeline.components.explainer import Explainer
from tpu_pipeline.components.models import (
    check_backbone_settings,
    check_model,
    is_user_model,
    user_model_source,
    weights_fingerprint,
)
from tpu_pipeline.components.packager import ServingPackager
from tpu_pipeline.components.pusher import AtomicPusher
from tpu_pipeline.components.span_shift_gate import VERDICT_KEY, SpanShiftGate
from tpu_pipeline.pipeline.wiring.node_ids import NodeIds

PREPROCESSING_FN = "tpu_pipeline.components.preprocessing.preprocessing_fn"
RUN_FN = "tpu_pipeline.components.trainer.run_fn"
TUNER_FN = "tpu_pipeline.components.tuner.tuner_fn"


@dataclasses.dataclass(frozen=True)
class ComponentOverrides:
    """What an orchestrator other than the local one swaps in (kubeflow/ builds Vertex's).

    Attributes:
      trainer_class: the Trainer component, e.g. one that runs a Vertex AI custom job.
      trainer_custom_config: entries merged over the Trainer's custom_config.
      pusher_class: the Pusher component; `pusher_custom_config` is merged over its
        custom_config (the serving check's sections).
      train_args: replaces TrainArgs from config, e.g. with a runtime parameter.
      tuner_class: the Tuner component (None: the local one, `tpu_pipeline.components.tuner`).
      tuner_custom_config: entries merged over the Tuner's custom_config.
      tune_args: TuneArgs (parallel trials), for a Tuner that runs them.
      check_label_drift: False leaves out the label-drift check, whose resolver
        (a custom strategy) TFX 1.16's Vertex AI compiler cannot compile.
    """

    trainer_class: type[Trainer] = Trainer
    trainer_custom_config: dict[str, Any] = dataclasses.field(default_factory=dict)
    pusher_class: type[Pusher] = AtomicPusher
    pusher_custom_config: dict[str, Any] | None = None
    train_args: trainer_pb2.TrainArgs | data_types.RuntimeParameter | None = None
    tuner_class: type[BaseComponent] | None = None
    tuner_custom_config: dict[str, Any] = dataclasses.field(default_factory=dict)
    tune_args: tuner_pb2.TuneArgs | None = None
    check_label_drift: bool = True


def example_gen_splits(dataset: DatasetConfig) -> dict[str, Any]:
    """ExampleGen's input and output configs: the files read, and how they become splits.

    With `dataset.split_patterns`, one input split per pattern and no hash split
    (TFX names the output splits after the input ones). Otherwise every file of
    `file_pattern`, hash-split by `eval_percent` unless the source has its own splits.
    """
    if dataset.split_patterns is not None:
        patterns = dataset.split_patterns
        return {
            "input_config": example_gen_pb2.Input(
                splits=[
                    example_gen_pb2.Input.Split(name="train", pattern=patterns.train),
                    example_gen_pb2.Input.Split(name="eval", pattern=patterns.eval),
                ]
            ),
            "output_config": example_gen_pb2.Output(),
        }
    return {
        "input_config": example_gen_pb2.Input(
            splits=[example_gen_pb2.Input.Split(name="all", pattern=file_pattern(dataset))]
        ),
        "output_config": example_gen_pb2.Output(
            split_config=example_gen_pb2.SplitConfig(
                splits=[
                    example_gen_pb2.SplitConfig.Split(
                        name="train", hash_buckets=100 - dataset.eval_percent
                    ),
                    example_gen_pb2.SplitConfig.Split(
                        name="eval", hash_buckets=dataset.eval_percent
                    ),
                ]
            )
        ),
    }


def user_code_fingerprint(package_dir: pathlib.Path | None = None) -> str:
    """Hash of the code TFX calls by dotted path (default: the `components` package).

    TFX fingerprints a `module_file` but not a dotted path, so without this a
    changed `run_fn` would be skipped as "cached" on the next run. A single
    module file is hashed alone.
    """
    digest = hashlib.sha256()
    package_dir = package_dir or pathlib.Path(components.__file__).parent
    sources = [package_dir] if package_dir.is_file() else sorted(package_dir.rglob("*.py"))
    for source in sources:
        digest.update(source.relative_to(package_dir.parent).as_posix().encode())
        digest.update(source.read_bytes())
    return digest.hexdigest()[:16]


def code_version(config: PipelineConfig) -> str:
    """The fingerprint of the code the components run.

    It covers the user's own model package and a local pretrained weights file too,
    so editing either retrains instead of reusing a cached Trainer.
    """
    version = user_code_fingerprint()
    if is_user_model(config.trainer.model):
        version += "+" + user_code_fingerprint(user_model_source(config.trainer.model))
    weights = weights_fingerprint(config.trainer.pretrained_weights)
    if weights is not None:
        version += "+weights-" + weights
    return version


def build_tuner(
    config: PipelineConfig,
    version: str,
    example_gen: BaseComponent,
    schema_gen: BaseComponent,
    transform: BaseComponent,
    overrides: ComponentOverrides,
) -> BaseComponent:
    """The Tuner: `tuner.trial_steps` per trial on the Trainer's data and Transform graph.

    Its custom_config holds what a trial reads (dataset, trainer, tuner sections and
    the code version), so the same data, code and search space are not searched twice.
    """
    tuner_class = overrides.tuner_class
    if tuner_class is None:
        from tpu_pipeline.components.tuner import (
            RecordingTuner,  # imports KerasTuner: only when tuning
        )

        tuner_class = RecordingTuner
    return tuner_class(
        tuner_fn=TUNER_FN,
        examples=example_gen.outputs["examples"],
        transform_graph=transform.outputs["transform_graph"],
        schema=schema_gen.outputs["schema"],
        train_args=trainer_pb2.TrainArgs(num_steps=config.tuner.trial_steps),
        eval_args=trainer_pb2.EvalArgs(num_steps=config.trainer.eval_steps),
        tune_args=overrides.tune_args,
        custom_config={**tuner_sections(config, version), **overrides.tuner_custom_config},
    ).with_id(NodeIds.TUNER)


def build_packager(
    config: PipelineConfig,
    version: str,
    example_gen: BaseComponent,
    transform: BaseComponent,
    trainer: BaseComponent,
) -> BaseComponent | None:
    """The ServingPackager after the Trainer (`serving.package`), or None.

    Its custom_config holds the dataset and `serving` sections and the code version, so
    changing the TFLite variants reruns it alone, from the Trainer's cached model.
    """
    if not config.serving.package:
        return None
    return ServingPackager(
        model=trainer.outputs["model"],
        examples=example_gen.outputs["examples"],
        transform_graph=transform.outputs["transform_graph"],
        custom_config=json.dumps(packager_sections(config, version), sort_keys=True),
    ).with_id(NodeIds.SERVING_PACKAGER)


def create_pipeline(
    config: PipelineConfig,
    *,
    data_root: str,
    pipeline_root: str,
    serving_dir: str,
    metadata_connection_config: metadata_store_pb2.ConnectionConfig | None = None,
    overrides: ComponentOverrides = ComponentOverrides(),
) -> tfx_pipeline.Pipeline:
    """Builds ExampleGen -> validation -> Transform -> Trainer -> ServingPackager -> Evaluator
    -> Pusher, and the Explainer beside the last two; with `drift.block_push` on data in
    spans, the SpanShiftGate before the Evaluator, whose verdict the Evaluator and the Pusher
    obey.

    Args:
      config: the run's configuration (dataset, trainer, evaluator, caching, Beam).
      data_root: folder of the raw files ExampleGen reads.
      pipeline_root: where TFX writes every artifact.
      serving_dir: base folder of the versioned, served models.
      metadata_connection_config: ML Metadata store; None lets the orchestrator
        choose (Vertex AI uses its own).
      overrides: Trainer, Pusher and train arguments another orchestrator needs.

    Raises:
      ConfigError: the configuration names a model or data format there is none of, or
        backbone settings that cannot work (images too small, no such weights file), or
        Grad-CAM on a model without that feature-map layer.
    """
    dataset = config.dataset
    # Names resolved by the registries: a typo fails here, before any component runs.
    check_model(config.trainer.model)
    check_backbone_settings(config.trainer, dataset.image_shape)
    # Grad-CAM's layer is kept by the Trainer's export: a wrong one fails before training.
    require_grad_cam_layer(config.explain, config.trainer.model, dataset)
    source_format(dataset)
    version = code_version(config)
    custom_config = component_sections(config, version)

    example_gen = build_example_gen(
        dataset,
        data_root,
        **example_gen_splits(dataset),
    ).with_id(NodeIds.EXAMPLE_GEN)
    schema_gen = ImportSchemaGen(schema_file=str(dataset.resolved_schema_file)).with_id(
        NodeIds.SCHEMA_GEN
    )
    # With the schema, StatisticsGen counts categorical int labels per value, which the
    # label-drift check compares.
    statistics_gen = StatisticsGen(
        examples=example_gen.outputs["examples"], schema=schema_gen.outputs["schema"]
    ).with_id(NodeIds.STATISTICS_GEN)
    example_validator = ExampleValidator(
        statistics=statistics_gen.outputs["statistics"], schema=schema_gen.outputs["schema"]
    ).with_id(NodeIds.EXAMPLE_VALIDATOR)
    previous_statistics = None
    checks_drift = dataset.reads_spans and dataset.label_drift_threshold
    if checks_drift and overrides.check_label_drift:
        previous_statistics = Resolver(
            strategy_class=PreviousSpanStatistics,
            examples=Channel(type=standard_artifacts.Examples),
            statistics=Channel(type=standard_artifacts.ExampleStatistics),
        ).with_id(NodeIds.PREVIOUS_SPAN_STATISTICS)
        previous_statistics.add_upstream_node(statistics_gen)  # so this run's span is known
    data_gate = DataGate(
        anomalies=example_validator.outputs["anomalies"],
        statistics=statistics_gen.outputs["statistics"],
        schema=schema_gen.outputs["schema"],
        label_feature=dataset.label_feature,
        label_drift_threshold=dataset.label_drift_threshold or 0.0,
        class_names=json.dumps(list(dataset.source.label_names or ())),
        previous_statistics=previous_statistics.outputs["statistics"]
        if previous_statistics
        else None,
    ).with_id(NodeIds.DATA_GATE)

    # The Trainer applies the transform graph in its tf.data pipeline, so
    # Transform only analyses the data and writes no transformed copy.
    transform = Transform(
        examples=example_gen.outputs["examples"],
        schema=schema_gen.outputs["schema"],
        preprocessing_fn=PREPROCESSING_FN,
        custom_config=custom_config,
        materialize=False,
        disable_statistics=True,
    ).with_id(NodeIds.TRANSFORM)
    transform.add_upstream_node(data_gate)

    baseline_resolver = Resolver(
        strategy_class=LatestBlessedModelStrategy,
        model=Channel(type=standard_artifacts.Model),
        model_blessing=Channel(type=standard_artifacts.ModelBlessing),
    ).with_id(NodeIds.BASELINE_RESOLVER)
    tuner = (
        build_tuner(config, version, example_gen, schema_gen, transform, overrides)
        if config.tuner.enabled
        else None
    )
    trainer = overrides.trainer_class(
        run_fn=RUN_FN,
        examples=example_gen.outputs["examples"],
        transform_graph=transform.outputs["transform_graph"],
        schema=schema_gen.outputs["schema"],
        base_model=baseline_resolver.outputs["model"] if config.trainer.warm_start else None,
        train_args=overrides.train_args
        or trainer_pb2.TrainArgs(num_steps=config.trainer.train_steps),
        eval_args=trainer_pb2.EvalArgs(num_steps=config.trainer.eval_steps),
        hyperparameters=tuner.outputs["best_hyperparameters"] if tuner else None,
        custom_config={**trainer_sections(config, version), **overrides.trainer_custom_config},
    ).with_id(NodeIds.TRAINER)
    # What the Evaluator judges and the Pusher publishes: the ServingPackager's model, made
    # from the Trainer's (calibrated, measured, converted), or the Trainer's as it is.
    packager = build_packager(config, version, example_gen, transform, trainer)
    served_model = packager.outputs["served_model"] if packager else trainer.outputs["model"]
    explainer = None
    if config.explain.enabled:
        explainer = Explainer(
            model=served_model,
            examples=example_gen.outputs["examples"],
            custom_config=json.dumps(explainer_sections(config, version), sort_keys=True),
        ).with_id(NodeIds.EXPLAINER)
    # A span whose images moved from the served model's must not be published: the same
    # check the run summary reports, made before the Evaluator, which refuses such a model
    # (so it never becomes the next run's baseline), and the Pusher, which says why
    # (components/span_shift_gate.py).
    span_shift_gate = None
    if dataset.reads_spans and config.drift.block_push:
        span_shift_gate = SpanShiftGate(
            model=served_model,
            baseline_model=baseline_resolver.outputs["model"],
            drift_config=config.drift.model_dump_json(),
        ).with_id(NodeIds.SPAN_SHIFT_GATE)
    gate_verdict = span_shift_gate.outputs[VERDICT_KEY] if span_shift_gate else None
    evaluator = JudgingEvaluator(
        examples=example_gen.outputs["examples"],
        model=served_model,
        baseline_model=baseline_resolver.outputs["model"],
        eval_config=build_eval_config(dataset),
        custom_config=evaluator_sections(config),
        span_shift=gate_verdict,
    ).with_id(NodeIds.EVALUATOR)
    pusher = overrides.pusher_class(
        model=served_model,
        model_blessing=evaluator.outputs["blessing"],
        evaluation=evaluator.outputs["evaluation"],
        statistics=statistics_gen.outputs["statistics"],
        span_shift=gate_verdict,
        # The Trainer's model has no warmup requests: the Pusher makes them from the eval split.
        examples=None if packager else example_gen.outputs["examples"],
        push_destination=pusher_pb2.PushDestination(
            filesystem=pusher_pb2.PushDestination.Filesystem(base_directory=serving_dir)
        ),
        custom_config={**pusher_sections(config), **(overrides.pusher_custom_config or {})},
    ).with_id(NodeIds.PUSHER)

    return tfx_pipeline.Pipeline(
        pipeline_name=config.full_pipeline_name,
        pipeline_root=pipeline_root,
        components=[
            example_gen,
            schema_gen,
            statistics_gen,
            example_validator,
            *([previous_statistics] if previous_statistics else []),
            data_gate,
            transform,
            *([tuner] if tuner else []),
            trainer,
            *([packager] if packager else []),
            baseline_resolver,
            evaluator,
            *([span_shift_gate] if span_shift_gate else []),
            pusher,
            *([explainer] if explainer else []),
        ],
        enable_cache=config.enable_cache,
        metadata_connection_config=metadata_connection_config,
        beam_pipeline_args=config.beam_pipeline_args or None,
    )
