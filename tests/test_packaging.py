"""A wheel holds every file the product reads from its own packages at run time.

Editable installs (the README's commands) read the checkout, so a file missing from
setup.py's package_data shows only in a wheel install, where the code that reads it fails
(the model card's page template was once left out this way).
"""

from __future__ import annotations

import ast
import pathlib

from tpu_pipeline.common.config import REPO_ROOT

from tests.test_layers import LAYERS

# Read from a checkout by the person deploying, never by the installed package at run time.
CHECKOUT_ONLY = {"kubeflow": {"Dockerfile", "tpu.Dockerfile", "user-code.Dockerfile", "*.yaml"}}


def _setup_keywords() -> dict:
    """setup()'s literal keyword arguments, read without running setup.py."""
    tree = ast.parse((REPO_ROOT / "setup.py").read_text())
    (call,) = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setup"
    ]
    return {kw.arg: kw.value for kw in call.keywords}


def _package_data() -> dict[str, list[str]]:
    return ast.literal_eval(_setup_keywords()["package_data"])


def _shipped(package: str, path: pathlib.Path, package_data: dict[str, list[str]]) -> bool:
    """Whether setuptools' glob of one of the package's patterns, from its folder, finds it."""
    folder = REPO_ROOT / package.replace(".", "/")
    return any(path in folder.glob(pattern) for pattern in package_data.get(package, []))


def _non_python_files(top: str) -> list[pathlib.Path]:
    return [
        path
        for path in (REPO_ROOT / top).rglob("*")
        if path.is_file() and path.suffix not in {".py", ".pyc"} and "__pycache__" not in path.parts
    ]


def _owning_package(path: pathlib.Path) -> str:
    """The innermost folder above `path` with an __init__.py, as a dotted package name."""
    folder = path.parent
    while not (folder / "__init__.py").exists():
        folder = folder.parent
    return ".".join(folder.relative_to(REPO_ROOT).parts)


def test_every_file_the_packages_read_at_run_time_is_in_package_data():
    package_data = _package_data()
    missing = []
    for top in LAYERS:
        for path in _non_python_files(top):
            if any(path.match(p) for p in CHECKOUT_ONLY.get(top, ())):
                continue
            if not _shipped(_owning_package(path), path, package_data):
                missing.append(str(path.relative_to(REPO_ROOT)))
    assert not missing, f"not in setup.py's package_data, so not in a wheel: {missing}"


def test_setup_packages_every_layer():
    """A package left out is missing from the images too (they install with setup.py), where
    a step fails importing it: TFX's Vertex AI entrypoint imports tpu_pipeline's types."""
    find_packages = _setup_keywords()["packages"]  # find_packages(include=[...])
    (include,) = [kw.value for kw in find_packages.keywords if kw.arg == "include"]
    assert set(LAYERS) <= set(ast.literal_eval(include))


def test_the_check_sees_the_templates_and_the_built_in_data():
    """The walk above is not empty: it finds both templates and the shipped data."""
    package_data = _package_data()
    for relative in (
        "components/model_card/model_card.html.j2",
        "pipeline/report/report.html.j2",
        "common/data/mnist/mnist.tfrecord.gz",
        "schemas/digits/schema.pbtxt",
    ):
        path = REPO_ROOT / relative
        assert path.exists(), relative
        assert _shipped(_owning_package(path), path, package_data), relative
    template = REPO_ROOT / "components/model_card/model_card.html.j2"
    assert not _shipped(
        _owning_package(template), template, {"tpu_pipeline.components.model_card": []}
    )
