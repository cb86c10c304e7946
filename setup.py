"""Installs tpu-pipeline: the pipeline, the code TFX calls, and the curated schemas."""

from setuptools import find_packages, setup

PACKAGE = "tpu_pipeline"
FOLDERS = ["cli", "common", "pipeline", "components", "serving_ops", "schemas", "kubeflow"]


def _packages_of(folders: list[str]) -> list[str]:
    """Each folder and its sub-packages, by their names inside the repository."""
    return find_packages(include=folders + [f"{folder}.*" for folder in folders])


setup(
    name="tpu-pipeline",
    version="0.1.0",
    description=(
        "A TFX pipeline from raw images to a validated, pushed model, with a TPU-first Trainer."
    ),
    license="Apache-2.0",
    python_requires=">=3.9,<3.11",
    # One import name: each top-level folder installs as `tpu_pipeline.<folder>`
    # (tpu_pipeline/__init__.py says why; in a checkout it reads the folders in place).
    packages=[PACKAGE] + [f"{PACKAGE}.{name}" for name in _packages_of(FOLDERS)],
    package_dir={PACKAGE: PACKAGE, **{f"{PACKAGE}.{folder}": folder for folder in FOLDERS}},
    package_data={
        f"{PACKAGE}.schemas": ["*/schema.pbtxt"],
        f"{PACKAGE}.pipeline.report": ["*.j2"],
        f"{PACKAGE}.components.model_card": ["*.j2"],
        # data/<name>/<file>, and image folders: data/<name>/<split>/<class>/<file>
        f"{PACKAGE}.common": ["data/*/*", "data/*/*/*/*"],
    },
    # Versions are pinned in requirements.lock; these are the direct needs.
    install_requires=[
        "tfx[kfp]==1.16.0",
        "apache-beam[gcp]==2.61.0",
        "dill",
        "scikit-learn",
        "pydantic>=2",
        "pyyaml",
        "matplotlib",
        "jinja2",
        "portalocker",
    ],
    entry_points={"console_scripts": [f"tpu-pipeline={PACKAGE}.cli.entry:console_main"]},
)
