"""`common.config` is a package of one module per section, and reads as the one file it was.

The expected names and messages were captured from the single-file `common/config.py`
before the split, so these tests fail if a name stops being importable from
`tpu_pipeline.common.config` or a user-facing error changes by one character.
"""

from __future__ import annotations

import ast
import importlib
import pathlib

import pytest

import tpu_pipeline.common.config
from tpu_pipeline.common.config import BUILTIN_DATA_DIR, REPO_ROOT, ConfigError, load_config

# Every public name of the single-file common/config.py, by the module it moved to.
NAMES_BEFORE_THE_SPLIT = {
    "base": ["REPO_ROOT", "ConfigError"],
    "dataset": [
        "BUILTIN_DATA_DIR",
        "SourceConfig",
        "SplitPatterns",
        "DatasetConfig",
        "BUILTIN_DATASETS",
        "DEFAULT_DATASET",
    ],
    "trainer": [
        "Accelerator",
        "Optimizer",
        "LearningRateScaling",
        "LearningRateDecay",
        "Precision",
        "TrainerConfig",
    ],
    "tuner": [
        "TunerObjective",
        "UNTUNABLE_TRAINER_FIELDS",
        "SearchValue",
        "SearchDimension",
        "TunerConfig",
    ],
    "evaluator": ["EvaluatorConfig"],
    "vertex": [
        "GcsUri",
        "TPU_V5E_MACHINE_PREFIX",
        "VertexTrainerConfig",
        "DataflowConfig",
        "ModelRegistryConfig",
        "ScheduleConfig",
        "VertexConfig",
    ],
    "serving": ["TFLiteVariant", "ServingConfig"],
    "pipeline": ["PipelineConfig"],
    "loading": ["load_config"],
}
PACKAGE_DIR = pathlib.Path(tpu_pipeline.common.config.__file__).parent


def _public_names_defined_in(path: pathlib.Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {target.id for target in node.targets if isinstance(target, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {name for name in names if not name.startswith("_")}


@pytest.mark.parametrize(
    "module, name",
    [(module, name) for module, names in NAMES_BEFORE_THE_SPLIT.items() for name in names],
)
def test_every_name_of_the_single_file_still_imports_from_common_config(module, name):
    section = importlib.import_module(f"tpu_pipeline.common.config.{module}")

    assert name in tpu_pipeline.common.config.__all__
    assert getattr(tpu_pipeline.common.config, name) is getattr(section, name)


@pytest.mark.parametrize(
    "module", sorted(path.stem for path in PACKAGE_DIR.glob("*.py") if path.stem != "__init__")
)
def test_each_public_name_of_a_section_module_is_exported_by_the_package(module):
    defined = _public_names_defined_in(PACKAGE_DIR / f"{module}.py")
    section = importlib.import_module(f"tpu_pipeline.common.config.{module}")

    assert defined, f"common/config/{module}.py defines no public name"
    assert defined <= set(tpu_pipeline.common.config.__all__)
    assert all(
        getattr(tpu_pipeline.common.config, name) is getattr(section, name) for name in defined
    )


def test_paths_still_point_at_the_repository_and_its_shipped_data():
    # Both moved one folder deeper with the split; their values must not have.
    assert (REPO_ROOT / "setup.py").is_file() and (REPO_ROOT / "common").is_dir()
    assert BUILTIN_DATA_DIR == REPO_ROOT / "common" / "data"
    assert (BUILTIN_DATA_DIR / "mnist" / "mnist.tfrecord.gz").is_file()


def test_a_bad_yaml_file_gets_the_same_message_to_the_byte(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(
        "dataset: mnist\ntrainer:\n  accelerator: tpux\n  epochs: 0\n  learning_rat: 0.1\n"
    )

    with pytest.raises(ConfigError) as error:
        load_config(str(path))

    assert str(error.value) == (
        f"invalid configuration ({path}):\n"
        "  trainer.epochs: Input should be greater than or equal to 1 (got 0)\n"
        "  trainer.accelerator: Input should be 'auto', 'tpu', 'gpu' or 'cpu' (got 'tpux')\n"
        "  trainer.learning_rat: Extra inputs are not permitted (got 0.1)"
    )


def test_an_error_in_every_section_gets_the_same_message_to_the_byte():
    vertex = {
        "project": "my-project",
        "pipeline_root": "gs://bucket/root",
        "data_root": "s3://bucket/data",
        "serving_dir": "gs://bucket/serving",
        "pipeline_image": "image",
        "trainer": {"machine_type": "cloud-tpu"},
        "schedule": {"time_zone": "Mars/Base"},
    }
    flags = {
        "dataset.source.image_value_range": [1.0, 1.0],
        "trainer.per_replica_batch_size": 0,
        "tuner.search_space": {"optimizer": {"values": ["adam", "lion"]}},
        "evaluator.accuracy_lower_bound": 2,
        "serving.tflite_variants": ["int8", "int8"],
        "vertex": vertex,
    }

    with pytest.raises(ConfigError) as error:
        load_config(None, flags)

    assert str(error.value) == (
        "invalid configuration (defaults + flags):\n"
        "  dataset.source: image_value_range must be (low, high) with low < high, "
        "got (1.0, 1.0)\n"
        "  trainer.per_replica_batch_size: Input should be greater than or equal to 1 (got 0)\n"
        "  tuner.search_space: optimizer: 'lion' is not a valid trainer.optimizer: "
        "Input should be 'adam', 'adamw' or 'sgd'\n"
        "  evaluator.accuracy_lower_bound: Input should be less than or equal to 1 (got 2)\n"
        "  serving: tflite_variants lists a variant twice: ('int8', 'int8')\n"
        "  vertex.data_root: String should match pattern "
        "'^gs://[a-z0-9][a-z0-9._-]+(/.*)?$' (got 's3://bucket/data')\n"
        "  vertex.trainer: machine_type 'cloud-tpu' goes with accelerator_type TPU_V2 or TPU_V3\n"
        "  vertex.schedule: time_zone 'Mars/Base' is not an IANA time zone name"
    )
