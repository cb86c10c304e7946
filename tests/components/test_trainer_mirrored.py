"""The same run_fn under MirroredStrategy on two logical CPU devices.

Logical devices must be configured before TensorFlow initialises, so run_fn
runs in a fresh process; the multi-replica path (global batch, distributed
datasets, mirrored variables, export) is the one GPUs and TPUs take.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.pipeline.e2e_helpers import serving_accuracy, split_files
from tpu_pipeline.common.config import ServingConfig
from tpu_pipeline.components.contract import trainer_sections
from tpu_pipeline.pipeline.wiring.graph import code_version

pytestmark = pytest.mark.slow

RUN_FN_ON_TWO_CPUS = """
import json, sys
from tpu_pipeline import components  # Keras 2 before TensorFlow loads
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from tfx.components.trainer.fn_args_utils import FnArgs
from tpu_pipeline.components.trainer import run_fn
run_fn(FnArgs(**json.loads(sys.argv[1])))
"""


def test_run_fn_trains_under_mirrored_strategy_on_two_cpu_devices(digits_run, tmp_path):
    config, summary = digits_run
    transform_dir = sorted((config.pipeline_root / "Transform" / "transform_graph").iterdir())[-1]
    serving_dir = tmp_path / "serving"
    fn_args = {
        "train_files": split_files(config, "train"),
        "eval_files": split_files(config, "eval"),
        "transform_graph_path": str(transform_dir),
        "serving_model_dir": str(serving_dir),
        "model_run_dir": str(tmp_path / "model_run" / "1"),
        "train_steps": config.trainer.train_steps,
        "eval_steps": None,
        "custom_config": trainer_sections(
            config.model_copy(update={"serving": ServingConfig(tflite_variants=())}),
            code_version(config),
        ),
    }
    result = subprocess.run(
        [sys.executable, "-c", RUN_FN_ON_TWO_CPUS, json.dumps(fn_args)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    info = json.loads((serving_dir / "assets.extra" / "training_info.json").read_text())
    assert info["strategy"] == "MirroredStrategy on 2 CPU devices"
    assert info["num_replicas"] == 2
    assert info["global_batch_size"] == 2 * config.trainer.per_replica_batch_size
    assert info["jit_compile"] is False
    accuracy = serving_accuracy(serving_dir, config)
    assert accuracy >= 0.9
    assert accuracy == pytest.approx(summary.metrics["accuracy"], abs=0.05)
