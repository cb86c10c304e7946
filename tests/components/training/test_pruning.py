"""trainer.pruning: validated config, the target sparsity reached in both loops, a plain export."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft
import tf_keras

from tests.pipeline.e2e_helpers import run_fn_args, serving_accuracy
from tpu_pipeline.common.config import (
    BUILTIN_DATASETS,
    ConfigError,
    DatasetConfig,
    PruningConfig,
    TrainerConfig,
    load_config,
)
from tpu_pipeline.common.tfx_api import FnArgs
from tpu_pipeline.components.contract import trainer_sections
from tpu_pipeline.components.device.policy import TrainingPolicy
from tpu_pipeline.components.models import build_model, compile_model, serving_copy
from tpu_pipeline.components.serving.measurements import read_measurements
from tpu_pipeline.components.serving.model_folder import package_model
from tpu_pipeline.components.trainer import run_fn
from tpu_pipeline.components.training.input_pipeline import EvalInput
from tpu_pipeline.components.training.loop import train
from tpu_pipeline.components.training.pruning import (
    is_pruned,
    prune_for_training,
    pruning_callbacks,
    pruning_schedule,
    strip_pruned,
)
from tpu_pipeline.pipeline.wiring.graph import code_version

DIGITS = DatasetConfig(**BUILTIN_DATASETS["digits"])


def test_pruning_is_off_by_default_and_each_field_is_checked_by_name():
    assert load_config().trainer.pruning is None
    config = load_config(None, {"trainer.pruning": {"target_sparsity": 0.8, "frequency": 10}})
    assert config.trainer.pruning == PruningConfig(target_sparsity=0.8, frequency=10)
    bad = {
        "trainer.pruning.target_sparsity": {"target_sparsity": 1.0},
        "trainer.pruning.frequency": {"target_sparsity": 0.5, "frequency": 0},
        "trainer.pruning: .*begin_fraction \\(0.8\\) must be below end_fraction": {
            "target_sparsity": 0.5,
            "begin_fraction": 0.8,
        },
        "trainer.pruning: .*initial_sparsity \\(0.6\\) must be below target_sparsity": {
            "target_sparsity": 0.5,
            "initial_sparsity": 0.6,
        },
        "trainer.pruning.target_sparsity: Field required": {"frequency": 5},
    }
    for message, pruning in bad.items():
        with pytest.raises(ConfigError, match=message):
            load_config(None, {"trainer.pruning": pruning})


def test_pruning_conflicts_are_config_errors():
    with pytest.raises(ConfigError, match="pruning cannot follow frozen_backbone_epochs"):
        load_config(
            None,
            {
                "trainer.model": "mobilenet_v2",
                "trainer.pretrained_weights": "imagenet",
                "trainer.frozen_backbone_epochs": 1,
                "trainer.pruning": {"target_sparsity": 0.5},
            },
        )
    with pytest.raises(ConfigError, match="serving.tflite_variants: the pruned variant"):
        load_config(None, {"serving.tflite_variants": ["float32", "pruned"]})


def test_the_schedule_ends_on_a_mask_update_so_the_target_is_reached():
    config = PruningConfig(target_sparsity=0.5, begin_fraction=0.1, end_fraction=0.7, frequency=7)
    schedule = pruning_schedule(config, total_steps=100)
    assert (schedule["begin_step"], schedule["end_step"], schedule["frequency"]) == (10, 66, 7)
    # A pruning window shorter than the frequency updates the masks every step instead.
    assert pruning_schedule(config, total_steps=5)["frequency"] == 1
    # Unset: ten updates over the window, whatever the run's length.
    default = pruning_schedule(PruningConfig(target_sparsity=0.5), total_steps=1000)
    assert (default["begin_step"], default["end_step"], default["frequency"]) == (0, 700, 70)


def _kernel_sparsity(model: tf_keras.Model) -> float:
    kernels = [w.numpy() for w in model.weights if w.name.endswith("kernel:0")]
    return sum(np.sum(k == 0) for k in kernels) / sum(k.size for k in kernels)


@pytest.mark.parametrize("loop", ["fit", "custom"])
def test_a_pruned_model_trains_to_the_target_sparsity_and_strips_to_the_plain_model(tmp_path, loop):
    rng = np.random.default_rng(0)
    images = rng.random((96, 8, 8, 1), dtype=np.float32)
    labels = rng.integers(0, 10, 96)
    data = tf.data.Dataset.from_tensor_slices((images, labels)).batch(16, drop_remainder=True)
    weighted = data.map(lambda x, y: (x, y, tf.ones_like(y, tf.float32)))
    pruning = PruningConfig(target_sparsity=0.6, end_fraction=0.5, frequency=2)
    tf_keras.utils.set_random_seed(1)
    model = prune_for_training(build_model("cifar10_cnn", (8, 8, 1), 10), pruning, 18)
    compile_model(model, tf_keras.optimizers.Adam(1e-3), False, "float32", 3)
    train(
        model,
        data.repeat(),
        EvalInput(weighted, 96),
        strategy=tf.distribute.get_strategy(),
        policy=TrainingPolicy(jit_compile=False, precision="float32", steps_per_execution=3),
        config=TrainerConfig(epochs=3, loop=loop, pruning=pruning),
        steps_per_epoch=6,
        batch_size=16,
        log_dir=str(tmp_path / "logs"),
        backup_dir=str(tmp_path / "backup"),
        callbacks=tuple(pruning_callbacks(pruning)),
    )

    stripped, info = strip_pruned(model, pruning, 18)
    assert is_pruned(model) and not is_pruned(stripped)
    assert info["sparsity"] == pytest.approx(0.6, abs=0.005)
    # Counted on the plain model: the zeros are in its own kernels, not in a mask beside them.
    assert _kernel_sparsity(stripped) == pytest.approx(0.6, abs=0.005)
    # The serving copy (a fresh build of the configured model) takes the weights as they are.
    copy = serving_copy(stripped.get_weights(), "cifar10_cnn", DIGITS)
    assert _kernel_sparsity(copy) == pytest.approx(0.6, abs=0.005)


def test_a_model_tfmot_cannot_wrap_is_a_config_error_naming_trainer_pruning():
    class Subclassed(tf_keras.Model):
        def __init__(self):
            super().__init__(name="mine")
            self.dense = tf_keras.layers.Dense(10)

        def call(self, inputs):
            return self.dense(inputs)

    with pytest.raises(ConfigError, match="trainer.pruning: model 'mine' cannot be pruned"):
        prune_for_training(Subclassed(), PruningConfig(target_sparsity=0.5), 10)


@pytest.mark.slow
def test_the_trainer_exports_a_plain_sparse_model_whose_pruned_tflite_is_measured(
    digits_run, tmp_path
):
    config, _ = digits_run
    config = config.model_copy(
        update={
            "trainer": config.trainer.model_copy(
                update={"pruning": PruningConfig(target_sparsity=0.5, frequency=20)}
            ),
            "serving": config.serving.model_copy(update={"tflite_variants": ("float32", "pruned")}),
        }
    )
    args = run_fn_args(config, tmp_path)
    args["custom_config"] = trainer_sections(config, code_version(config))
    run_fn(FnArgs(**args))

    serving = tmp_path / "serving"
    info = json.loads((serving / "assets.extra" / "training_info.json").read_text())
    assert info["pruning"]["sparsity"] == pytest.approx(0.5, abs=0.005)
    # No wrapper survives the export: no masks, thresholds or step counters, and sparse kernels.
    # Every variable the SavedModel holds, by its path in the saved object graph.
    checkpoint = tf.train.load_checkpoint(str(serving / "variables" / "variables"))
    paths = list(checkpoint.get_variable_to_shape_map())
    assert not [path for path in paths if "mask" in path or "pruning_step" in path]
    kernels = [checkpoint.get_tensor(path) for path in paths if "/kernel/" in path]
    assert kernels
    assert sum(np.sum(k == 0) for k in kernels) / sum(k.size for k in kernels) == pytest.approx(
        0.5, abs=0.005
    )
    assert serving_accuracy(serving, config) >= 0.9
    # The ServingPackager, after the Trainer, converts and measures the export.
    served = tmp_path / "served"
    package_model(
        str(serving),
        str(served),
        tft.TFTransformOutput(args["transform_graph_path"]),
        config.dataset,
        config.serving,
        train_files=args["train_files"],
        eval_files=args["eval_files"],
    )
    measured = {m["name"]: m for m in read_measurements(str(served))["models"]}
    assert list(measured) == ["saved_model", "float32", "pruned"]
    pruned, dense = measured["pruned"], measured["float32"]
    # The sparse format is lossless: the same accuracy, within the gate, in a smaller file.
    assert pruned["published"] and pruned["accuracy"] == pytest.approx(dense["accuracy"])
    assert pruned["size_bytes"] < 0.75 * dense["size_bytes"]
    assert (served / "tflite" / "pruned.tflite").stat().st_size == pruned["size_bytes"]
    # Half the weights are zeros: the dense files compress to well under their size, and the
    # sparse one (no zeros left to squeeze, but indices) still downloads smaller than float32.
    for name in ("saved_model", "float32"):
        assert measured[name]["gzip_bytes"] < 0.8 * measured[name]["size_bytes"], name
    assert pruned["gzip_bytes"] < dense["gzip_bytes"]
