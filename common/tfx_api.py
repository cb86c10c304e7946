"""Every TFX name tpu-pipeline uses, loaded on first use from the module that defines it.

TFX's public API is `tfx.v1`, but importing it also imports the Vertex AI SDK
(~8 s, STACK.md) on every local run and in every container step. The product
imports the same classes from TFX's own modules instead, and this file is the
one place that knows those paths: a TFX upgrade that moves a name touches only
this file, and `tests/common/test_tfx_api.py` says which name moved. Names load
lazily (PEP 562), so asking for `FnArgs` does not import the Kubeflow compiler.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> "module" (the name is that module) or "module:attribute".
_PATHS = {
    # Components and what pipelines are built of.
    "Evaluator": "tfx.components:Evaluator",
    "ExampleValidator": "tfx.components:ExampleValidator",
    "FileBasedExampleGen": "tfx.components:FileBasedExampleGen",
    "ImportSchemaGen": "tfx.components.schema_gen.import_schema_gen.component:ImportSchemaGen",
    "Pusher": "tfx.components:Pusher",
    "StatisticsGen": "tfx.components:StatisticsGen",
    "Trainer": "tfx.components:Trainer",
    "Tuner": "tfx.components.tuner.component:Tuner",
    "Transform": "tfx.components:Transform",
    "Resolver": "tfx.dsl.components.common.resolver:Resolver",
    "LatestBlessedModelStrategy": (
        "tfx.dsl.input_resolution.strategies.latest_blessed_model_strategy"
        ":LatestBlessedModelStrategy"
    ),
    "BaseComponent": "tfx.dsl.components.base.base_component:BaseComponent",
    "BaseBeamComponent": "tfx.dsl.components.base.base_beam_component:BaseBeamComponent",
    "executor_spec": "tfx.dsl.components.base.executor_spec",
    "component": "tfx.dsl.component.experimental.decorators:component",
    "InputArtifact": "tfx.dsl.component.experimental.annotations:InputArtifact",
    "OutputArtifact": "tfx.dsl.component.experimental.annotations:OutputArtifact",
    "Channel": "tfx.types:Channel",
    "ChannelParameter": "tfx.types.component_spec:ChannelParameter",
    "ExecutionParameter": "tfx.types.component_spec:ExecutionParameter",
    "Artifact": "tfx.types:Artifact",
    "ExampleAnomalies": "tfx.types.standard_artifacts:ExampleAnomalies",
    "ExampleStatistics": "tfx.types.standard_artifacts:ExampleStatistics",
    "Examples": "tfx.types.standard_artifacts:Examples",
    "Schema": "tfx.types.standard_artifacts:Schema",
    "Parameter": "tfx.dsl.component.experimental.annotations:Parameter",
    "ResolverStrategy": "tfx.dsl.components.common.resolver:ResolverStrategy",
    "standard_artifacts": "tfx.types.standard_artifacts",
    "standard_component_specs": "tfx.types.standard_component_specs",
    "artifact_utils": "tfx.types.artifact_utils",
    # Executors we extend, and what user code receives.
    "BaseExampleGenExecutor": (
        "tfx.components.example_gen.base_example_gen_executor:BaseExampleGenExecutor"
    ),
    "example_gen_utils": "tfx.components.example_gen.utils",
    "examples_utils": "tfx.components.util.examples_utils",
    "write_split": "tfx.components.example_gen.write_split",
    "tfx_pusher_executor": "tfx.components.pusher.executor",
    "tfx_evaluator_executor": "tfx.components.evaluator.executor",
    "evaluator_constants": "tfx.components.evaluator.constants",
    "FnArgs": "tfx.components.trainer.fn_args_utils:FnArgs",
    "tfx_trainer_executor": "tfx.components.trainer.executor",
    "TunerFnResult": "tfx.components.tuner.component:TunerFnResult",
    "tfx_tuner_executor": "tfx.components.tuner.executor",
    # Protos.
    "example_gen_pb2": "tfx.proto.example_gen_pb2",
    "pusher_pb2": "tfx.proto.pusher_pb2",
    "range_config_pb2": "tfx.proto.range_config_pb2",
    "trainer_pb2": "tfx.proto.trainer_pb2",
    "tuner_pb2": "tfx.proto.tuner_pb2",
    # Orchestration.
    "tfx_pipeline": "tfx.orchestration.pipeline",
    "data_types": "tfx.orchestration.data_types",
    "metadata": "tfx.orchestration.metadata",
    "LocalDagRunner": "tfx.orchestration.local.local_dag_runner:LocalDagRunner",
    "kubeflow_v2_dag_runner": "tfx.orchestration.kubeflow.v2.kubeflow_v2_dag_runner",
    "exit_handler": "tfx.orchestration.kubeflow.decorators:exit_handler",
    "FinalStatusStr": "tfx.orchestration.kubeflow.decorators:FinalStatusStr",
    # Vertex AI training (imports the Vertex AI SDK: ask for these only in kubeflow/).
    "VertexTrainer": "tfx.extensions.google_cloud_ai_platform.trainer.component:Trainer",
    "ai_platform_constants": "tfx.extensions.google_cloud_ai_platform.constants",
    "ai_platform_trainer_executor": "tfx.extensions.google_cloud_ai_platform.trainer.executor",
    "ai_platform_runner": "tfx.extensions.google_cloud_ai_platform.runner",
    "ai_platform_training_clients": "tfx.extensions.google_cloud_ai_platform.training_clients",
    "VertexTuner": "tfx.extensions.google_cloud_ai_platform.tuner.component:Tuner",
    "ai_platform_tuner_executor": "tfx.extensions.google_cloud_ai_platform.tuner.executor",
    # Helpers.
    "fileio": "tfx.dsl.io.fileio",
    "io_utils": "tfx.utils.io_utils",
    "infra_validator_request_builder": "tfx.components.infra_validator.request_builder",
    "json_utils": "tfx.utils.json_utils",
    "name_utils": "tfx.utils.name_utils",
    "path_utils": "tfx.utils.path_utils",
    "proto_utils": "tfx.utils.proto_utils",
}

__all__ = sorted(_PATHS)


def __getattr__(name: str) -> Any:
    if name not in _PATHS:
        raise AttributeError(
            f"tpu_pipeline.common.tfx_api has no {name!r}; add its TFX path to _PATHS"
        )
    module_name, _, attribute = _PATHS[name].partition(":")
    module = importlib.import_module(module_name)
    value = getattr(module, attribute) if attribute else module
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return __all__
