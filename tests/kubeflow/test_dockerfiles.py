"""The images cannot be built here: check what they copy and pin against the repository."""

from __future__ import annotations

import importlib.util
import re

import pytest

from common.config import REPO_ROOT
from kubeflow import tpu_image

KUBEFLOW = REPO_ROOT / "kubeflow"
DOCKERFILES = [KUBEFLOW / "Dockerfile", KUBEFLOW / "tpu.Dockerfile"]


def _locked_version(package: str) -> str:
    lock = (REPO_ROOT / "requirements.lock").read_text()
    return re.search(rf"^{re.escape(package)}==(\S+)$", lock, re.MULTILINE).group(1)


def _instructions(path, name: str) -> list[str]:
    return re.findall(rf"^{name} (.+)$", path.read_text(), re.MULTILINE)


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_every_copied_path_exists_and_code_is_installed(dockerfile):
    copies = [line for line in _instructions(dockerfile, "COPY") if not line.startswith("--from")]
    copied = {source.rstrip("/") for line in copies for source in line.split()[:-1]}
    for source in copied:
        assert (REPO_ROOT / source).exists(), f"{dockerfile.name} copies missing {source}"
    # Everything setup.py packages, plus the schemas the compiled spec points at.
    assert {"cli", "common", "pipeline", "components", "kubeflow", "schemas", "setup.py"} <= copied
    text = dockerfile.read_text()
    assert "pip install -r requirements.lock" in text
    assert "pip install --no-deps -e ." in text
    assert "TF_USE_LEGACY_KERAS=1" in text
    assert "WORKDIR /pipeline" in text  # kubeflow.runner.CONTAINER_SOURCE_DIR


def test_pipeline_image_versions_follow_the_lock():
    text = (KUBEFLOW / "Dockerfile").read_text()
    assert f"FROM gcr.io/tfx-oss-public/tfx:{_locked_version('tfx')}" in text
    assert f"beam_python3.10_sdk:{_locked_version('apache-beam')} " in text


def _arg_default(text: str, name: str) -> str:
    return re.search(rf"^ARG {name}=(\S+)$", text, re.MULTILINE).group(1)


def test_tpu_image_versions_come_from_tpu_image_and_follow_the_lock():
    text = (KUBEFLOW / "tpu.Dockerfile").read_text()
    assert _arg_default(text, "BASE_IMAGE") == tpu_image.TPU_POD_BASE_IMAGE
    assert _instructions(KUBEFLOW / "tpu.Dockerfile", "FROM") == ["${BASE_IMAGE}"]
    assert _arg_default(text, "TF_VERSION") == tpu_image.TENSORFLOW_VERSION
    assert _arg_default(text, "LIBTPU_VERSION") == tpu_image.LIBTPU_VERSION
    locked = _locked_version("tensorflow").split(".")[:2]
    assert tpu_image.TENSORFLOW_VERSION.split(".")[:2] == locked
    assert "-cp310-cp310-" in text and "cp310" in tpu_image.TPU_POD_BASE_IMAGE  # python3.10
    assert tpu_image.LIBTPU_PATH in text


def test_tpu_image_sets_the_pjrt_variables_tpu_image_names():
    text = (KUBEFLOW / "tpu.Dockerfile").read_text()
    for name, value in tpu_image.PJRT_ENV.items():
        assert re.search(rf"^\s*(ENV )?{name}={re.escape(value)}\b", text, re.MULTILINE), name


def test_tpu_image_keeps_the_pod_base_images_entrypoint():
    # Vertex's pod base image sets the slice up in its ENTRYPOINT and then runs CMD/args;
    # the job passes TFX's command as args (kubeflow/tpu_job.py).
    for instruction in ("ENTRYPOINT", "CMD"):
        assert _instructions(KUBEFLOW / "tpu.Dockerfile", instruction) == []


def test_the_command_vertex_runs_in_the_image_exists():
    # The compiled spec runs `python -m <this>` in the pipeline image.
    module = "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor"
    assert importlib.util.find_spec(module) is not None


def test_user_code_image_layers_a_teams_package_on_the_path_of_either_image():
    dockerfile = KUBEFLOW / "user-code.Dockerfile"
    assert _instructions(dockerfile, "FROM") == ["${BASE_IMAGE}"]
    assert _instructions(dockerfile, "COPY") == [". /user_code"]
    (path,) = _instructions(dockerfile, "ENV")
    assert path.startswith("PYTHONPATH=/user_code")
    assert "user-code.Dockerfile" in (REPO_ROOT / "README.md").read_text()
