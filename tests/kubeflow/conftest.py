"""Compiled Vertex AI pipeline specs of the shipped deployment configs, built once per session."""

from __future__ import annotations

import json

import pytest

from tpu_pipeline.common.config import REPO_ROOT, load_config

DEPLOYMENT_TARGETS = ("cpu", "gpu", "tpu", "gpu-multiworker", "tpu-multihost", "tpu-spot")
DEPLOYMENT_CONFIGS = {
    target: REPO_ROOT / "kubeflow" / f"vertex-{target}.yaml" for target in DEPLOYMENT_TARGETS
}
# What the shipped configs say until a user names their own project (kubeflow/presubmit.py).
PLACEHOLDER_PROJECT = "your-gcp-project"


def own_project_config(folder, target: str = "cpu"):
    """A shipped deployment config with the placeholder project replaced, as a user edits it."""
    text = DEPLOYMENT_CONFIGS[target].read_text().replace(PLACEHOLDER_PROJECT, "acme-ml-prod")
    path = folder / f"vertex-{target}.yaml"
    path.write_text(text)
    return path


# Over vertex-cpu.yaml: the Trainer as a custom job on a TPU v3-8 (TPU VM via `cloud-tpu`).
TPU_V3_8 = {
    "vertex.trainer.runs_on": "custom_job",
    "vertex.trainer.machine_type": "cloud-tpu",
    "vertex.trainer.accelerator_type": "TPU_V3",
    "vertex.trainer.accelerator_count": 8,
    "vertex.trainer.image": "us-central1-docker.pkg.dev/my-project/tpu-pipeline/trainer-tpu:0.1.0",
}


@pytest.fixture(scope="session")
def compile_spec(tmp_path_factory):
    """compile_spec(target, **overrides) -> (config, spec dict, spec path), cached per arguments."""
    from tpu_pipeline.kubeflow.runner import compile_pipeline

    cache: dict[tuple, tuple] = {}

    def compile_(target: str, **overrides):
        key = (target, tuple(sorted(overrides.items())))
        if key not in cache:
            config = load_config(str(DEPLOYMENT_CONFIGS[target]), overrides)
            path = tmp_path_factory.mktemp(f"spec-{target}") / "pipeline.json"
            compile_pipeline(config, path)
            cache[key] = (config, json.loads(path.read_text()), path)
        return cache[key]

    return compile_


def task_parameter(spec: dict, task: str, name: str):
    """A task's constant input parameter, decoded from JSON when it holds JSON."""
    value = spec["pipelineSpec"]["root"]["dag"]["tasks"][task]["inputs"]["parameters"][name]
    text = value["runtimeValue"]["constantValue"]["stringValue"]
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def executor(spec: dict, task: str) -> dict:
    return spec["pipelineSpec"]["deploymentSpec"]["executors"][f"{task}_executor"]["container"]


def worker_pools(spec: dict) -> list[dict]:
    """The custom job's worker pool specs, from the Trainer's custom_config."""
    training_args = task_parameter(spec, "Trainer", "custom_config")["ai_platform_training_args"]
    return training_args["job_spec"]["worker_pool_specs"]


def worker_pool(spec: dict) -> dict:
    """The custom job's one worker pool spec."""
    (pool,) = worker_pools(spec)
    return pool
