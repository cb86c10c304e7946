"""Installs tpu-pipeline: the pipeline, the code TFX calls, and the curated schemas."""

from setuptools import find_packages, setup

setup(
    name="tpu-pipeline",
    version="0.1.0",
    description=(
        "A TFX pipeline from raw images to a validated, pushed model, with a TPU-first Trainer."
    ),
    license="Apache-2.0",
    python_requires=">=3.9,<3.11",
    packages=find_packages(
        include=[
            "cli",
            "common",
            "common.*",
            "pipeline",
            "pipeline.*",
            "components",
            "components.*",
            "tpu_pipeline",
            "serving_ops",
            "serving_ops.*",
            "schemas",
            "kubeflow",
            "kubeflow.*",
        ]
    ),
    package_data={
        "schemas": ["*/schema.pbtxt"],
        "pipeline.report": ["*.j2"],
        "components.model_card": ["*.j2"],
        # data/<name>/<file>, and image folders: data/<name>/<split>/<class>/<file>
        "common": ["data/*/*", "data/*/*/*/*"],
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
    entry_points={"console_scripts": ["tpu-pipeline=cli.entry:main"]},
)
