"""Tuning on Vertex AI: TFX's Vertex tuner extension, parallel trials on the Trainer's machines."""

from __future__ import annotations

import json

from tests.kubeflow.conftest import DEPLOYMENT_CONFIGS, executor, task_parameter
from tpu_pipeline.common.config import load_config
from tpu_pipeline.common.tfx_api import json_utils, standard_artifacts
from tpu_pipeline.components.training.hyperparameters import TRIALS_SUBDIR
from tpu_pipeline.components.tuner import TRIALS_DIR_KEY
from tpu_pipeline.kubeflow.custom_job import worker_pool_specs

TUNING = {"tuner.enabled": True, "tuner.num_parallel_trials": 3}


def test_compiled_tuner_runs_trials_as_a_vertex_job_on_the_trainers_tpu(compile_spec):
    # Imports the Vertex SDK: not at collection.
    from tpu_pipeline.common.tfx_api import ai_platform_tuner_executor

    config, spec, _ = compile_spec("tpu", **TUNING)
    tasks = spec["pipelineSpec"]["root"]["dag"]["tasks"]
    assert "Tuner" in tasks["Trainer"]["dependentTasks"]
    best = tasks["Trainer"]["inputs"]["artifacts"]["hyperparameters"]["taskOutputArtifact"]
    assert best == {"producerTask": "Tuner", "outputArtifactKey": "best_hyperparameters"}
    assert (
        "tpu_pipeline.kubeflow.tuner_job.VertexTrialRecordingExecutor"
        in executor(spec, "Tuner")["args"]
    )
    assert task_parameter(spec, "Tuner", "tune_args") == {"num_parallel_trials": 3}
    custom_config = task_parameter(spec, "Tuner", "custom_config")
    job = custom_config[ai_platform_tuner_executor.TUNING_ARGS_KEY]
    (pool,) = job["job_spec"]["worker_pool_specs"]
    assert [pool] == worker_pool_specs(config.vertex)  # the Trainer's machine, image and TPU
    assert pool["machine_spec"]["machine_type"].startswith("ct5lp-hightpu-")
    assert custom_config["ai_platform_enable_vertex"] is True
    assert custom_config["trainer"]["accelerator"] == "tpu"  # trials train on the job's TPU
    # Each trial runs on one machine: the Trainer's promise over all of them is not checked.
    assert custom_config["trainer"]["promised_devices"] is None
    assert custom_config["tuner"]["num_parallel_trials"] == 3


def test_compiled_pipeline_without_tuning_has_no_tuner(compile_spec):
    _, spec, _ = compile_spec("tpu")
    tasks = spec["pipelineSpec"]["root"]["dag"]["tasks"]
    assert "Tuner" not in tasks and "hyperparameters" not in tasks["Trainer"]["inputs"].get(
        "artifacts", {}
    )


def test_vertex_tuner_starts_one_worker_per_parallel_trial_writing_into_its_output(
    monkeypatch, tmp_path
):
    """What TFX's Vertex tuner executor would send, captured before any network call."""
    # Imported here: TFX's Vertex extension imports the Vertex SDK, which collecting need not.
    from tpu_pipeline.common.tfx_api import ai_platform_tuner_executor
    from tpu_pipeline.kubeflow.tuner_job import (
        VertexTrialRecordingExecutor,
        tuner_job_custom_config,
    )

    config = load_config(str(DEPLOYMENT_CONFIGS["tpu"]), TUNING)
    started = {}

    def start_cloud_training(inputs, outputs, exec_properties, executor_class_path, args, *rest):
        started.update(properties=exec_properties, executor=executor_class_path, args=args)

    monkeypatch.setattr(
        ai_platform_tuner_executor.runner, "start_cloud_training", start_cloud_training
    )
    results = standard_artifacts.TunerResults()
    results.uri = "gs://bucket/root/Tuner/tuner_results/1"
    exec_properties = {
        "custom_config": json_utils.dumps(tuner_job_custom_config(config)),
        "tune_args": json.dumps({"num_parallel_trials": 3}),
    }

    VertexTrialRecordingExecutor().Do({}, {"tuner_results": [results]}, exec_properties)

    chief, workers = started["args"]["job_spec"]["worker_pool_specs"]
    assert workers["replica_count"] == 2 and workers["machine_spec"] == chief["machine_spec"]
    assert started["executor"].endswith("tuner.executor._WorkerExecutor")
    custom_config = json.loads(started["properties"]["custom_config"])
    assert custom_config[TRIALS_DIR_KEY] == f"{results.uri}/{TRIALS_SUBDIR}"
