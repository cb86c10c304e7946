"""The images cannot be built here: check what they copy and pin against the repository."""

from __future__ import annotations

import importlib.util
import re
import subprocess

import pytest

from tests.test_layers import LAYERS
from tpu_pipeline.common.config import REPO_ROOT
from tpu_pipeline.kubeflow import tpu_image

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
    # Everything setup.py installs under its one import name (the schemas are also what the
    # compiled spec points at), and the folder of that name.
    assert set(LAYERS) | {"tpu_pipeline", "setup.py"} <= copied
    text = dockerfile.read_text()
    assert "pip install -r requirements.lock" in text
    assert "pip install --no-deps -e ." in text
    assert "TF_USE_LEGACY_KERAS=1" in text
    assert "WORKDIR /pipeline" in text  # kubeflow.cluster_config.CONTAINER_SOURCE_DIR


def test_pipeline_image_versions_follow_the_lock():
    text = (KUBEFLOW / "Dockerfile").read_text()
    assert f"FROM gcr.io/tfx-oss-public/tfx:{_locked_version('tfx')}" in text
    assert f"beam_python3.10_sdk:{_locked_version('apache-beam')} " in text


def _arg_default(text: str, name: str) -> str:
    return re.search(rf"^ARG {name}=(\S+)$", text, re.MULTILINE).group(1)


TPU_DOCKERFILE = KUBEFLOW / "tpu.Dockerfile"


def test_tpu_image_pins_come_from_tpu_image_and_its_tensorflow_is_the_locked_one():
    text = TPU_DOCKERFILE.read_text()
    # By digest, never a moving tag: the lock's, given as a build argument (test_image_lock.py).
    assert _arg_default(text, "BASE_IMAGE") == f"{tpu_image.TPU_POD_BASE_IMAGE}@sha256:UNSET"
    assert _instructions(TPU_DOCKERFILE, "FROM") == ["${BASE_IMAGE}"]
    assert _arg_default(text, "TF_VERSION") == tpu_image.TENSORFLOW_VERSION
    assert tpu_image.TENSORFLOW_VERSION == _locked_version("tensorflow")
    assert _arg_default(text, "TF_TPU_WHEEL_SHA256") == tpu_image.TENSORFLOW_TPU_WHEEL_SHA256
    assert _arg_default(text, "LIBTPU_VERSION") == tpu_image.LIBTPU_VERSION
    assert _arg_default(text, "LIBTPU_SHA256") == tpu_image.UNSET  # the lock's, as an argument
    assert "cp310" in tpu_image.TPU_POD_BASE_IMAGE  # python3.10, as the lock
    assert tpu_image.LIBTPU_PATH in text


def _expanded(text: str, value: str) -> str:
    """`value` with the Dockerfile's `${ARG}` references replaced by their defaults."""
    return re.sub(r"\$\{(\w+)\}", lambda ref: _arg_default(text, ref.group(1)), value)


def test_every_file_the_tpu_image_downloads_is_checked_by_sha256():
    text = TPU_DOCKERFILE.read_text()
    urls = [_expanded(text, url) for url in re.findall(r'"(https://[^"]+)"', text)]
    assert urls == [tpu_image.LIBTPU_URL]  # libtpu, the one file fetched by URL...
    assert 'echo "${LIBTPU_SHA256}  /lib/libtpu.so" | sha256sum -c -' in text  # ...checked
    # TensorFlow's TPU wheel, from PyPI only with its hash.
    assert '"tensorflow-tpu==${TF_VERSION} --hash=sha256:${TF_TPU_WHEEL_SHA256}"' in text
    assert "pip install --no-deps --only-binary=:all: --require-hashes -r" in text
    assert "pip uninstall -y tensorflow" in text  # the CPU build leaves no files behind
    # Besides: the repository itself, and the lock's packages, pinned by version (the lock
    # holds no hashes yet).
    for line in re.findall(r"pip install (.+?)(?: \\|$)", text, re.MULTILINE):
        assert line in ("-r requirements.lock", "--no-deps -e .") or "--require-hashes" in line


def test_the_tpu_wheel_hash_is_a_sha256_and_unset_is_what_no_build_accepts():
    assert re.fullmatch("[0-9a-f]{64}", tpu_image.TENSORFLOW_TPU_WHEEL_SHA256)
    assert not re.fullmatch("[0-9a-f]{64}", tpu_image.UNSET)  # docker and sha256sum refuse it


def _pin_guard() -> str:
    """The shell of the Dockerfile's RUN that refuses UNSET hashes, as `sh -c` runs it."""
    text = TPU_DOCKERFILE.read_text()
    (guard,) = re.findall(r"^RUN (for pin in .+?done)$", text, re.MULTILINE | re.DOTALL)
    return guard.replace("\\\n", "\n")


@pytest.mark.parametrize("unset", ["TF_TPU_WHEEL_SHA256", "LIBTPU_SHA256"])
def test_the_tpu_image_build_stops_on_an_unset_hash_naming_it(unset):
    pins = {"TF_TPU_WHEEL_SHA256": "a" * 64, "LIBTPU_SHA256": "b" * 64, unset: tpu_image.UNSET}
    run = subprocess.run(["sh", "-c", _pin_guard()], env=pins, capture_output=True, text=True)
    assert run.returncode == 1
    assert run.stderr.strip() == (
        f"kubeflow/tpu.Dockerfile: {unset} is not set; "
        "pass the --build-arg flags python -m tpu_pipeline.kubeflow.tpu_image prints"
    )
    pins[unset] = "c" * 64
    assert subprocess.run(["sh", "-c", _pin_guard()], env=pins).returncode == 0


def test_tpu_image_sets_the_pjrt_variables_tpu_image_names():
    text = TPU_DOCKERFILE.read_text()
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
