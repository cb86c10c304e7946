"""The wheel is what users install: one import name of its own, every file the code reads.

Editable installs (the README's commands) read the checkout, so what only a wheel gets
wrong shows here: a file missing from setup.py's package_data (the model card's page
template was once left out this way), or a folder landing at the top of site-packages
beside other distributions' (`kubeflow` is the Kubeflow SDK's own name). The wheel is
built by pip from a copy of the sources, as a user's `pip install` would build it.
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

from tests.test_layers import LAYERS as FOLDERS
from tpu_pipeline.common.config import REPO_ROOT

# Read from a checkout by the person deploying, never by the installed package at run time.
CHECKOUT_ONLY = {"kubeflow": {"Dockerfile", "tpu.Dockerfile", "user-code.Dockerfile", "*.yaml"}}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    source = tmp_path_factory.mktemp("source")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in [*FOLDERS, "tpu_pipeline"]:
        shutil.copytree(REPO_ROOT / folder, source / folder, ignore=ignore)
    for name in ("setup.py", "README.md", "LICENSE"):
        shutil.copy(REPO_ROOT / name, source / name)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"]
        + ["--no-index", "--wheel-dir", str(out), str(source)],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("*.whl")
    with zipfile.ZipFile(built) as archive:
        yield archive


def _checkout_files(top: str) -> list[pathlib.Path]:
    return [
        path
        for path in (REPO_ROOT / top).rglob("*")
        if path.is_file()
        and path.suffix != ".pyc"
        and "__pycache__" not in path.parts
        and not any(path.match(pattern) for pattern in CHECKOUT_ONLY.get(top, ()))
    ]


def test_the_wheel_adds_one_import_name_to_site_packages(wheel):
    tops = {name.split("/")[0] for name in wheel.namelist()}

    assert {top for top in tops if not top.endswith(".dist-info")} == {"tpu_pipeline"}


def test_the_command_runs_from_the_one_import_name(wheel):
    (entry_points,) = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]

    assert "tpu-pipeline = tpu_pipeline.cli.entry:console_main" in wheel.read(entry_points).decode()


def test_every_file_the_packages_read_at_run_time_is_in_the_wheel(wheel):
    shipped = set(wheel.namelist())
    missing = [
        str(path.relative_to(REPO_ROOT))
        for top in FOLDERS
        for path in _checkout_files(top)
        if f"tpu_pipeline/{path.relative_to(REPO_ROOT).as_posix()}" not in shipped
    ]

    assert not missing, f"not in the wheel (setup.py's packages or package_data): {missing}"


def test_the_check_sees_the_templates_and_the_built_in_data(wheel):
    """The walk above is not empty: it finds both templates and the shipped data."""
    walked = {p.relative_to(REPO_ROOT).as_posix() for top in FOLDERS for p in _checkout_files(top)}
    for relative in (
        "components/model_card/model_card.html.j2",
        "pipeline/report/report.html.j2",
        "common/data/mnist/mnist.tfrecord.gz",
        "schemas/digits/schema.pbtxt",
        "components/trainer.py",
    ):
        assert relative in walked, relative
        assert f"tpu_pipeline/{relative}" in wheel.namelist(), relative
