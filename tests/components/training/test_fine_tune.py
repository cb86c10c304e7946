"""Fine-tuning phases: the head alone, then the whole model slower; a restart replays neither.

A small model with a nested `backbone` (Conv + BatchNorm) stands in for a Keras
application: the phases only look for the nested model and its BatchNorm layers,
and it trains in a second where MobileNetV2 needs a minute.
"""

from __future__ import annotations

import itertools
import logging
import os

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from tpu_pipeline.common.config import ConfigError, TrainerConfig, load_config
from tpu_pipeline.components.device.policy import TrainingPolicy
from tpu_pipeline.components.models._backbone import BACKBONE_LAYER
from tpu_pipeline.components.training.fine_tune import (
    FINE_TUNE,
    FROZEN_BACKBONE,
    describe_phases,
    fine_tuning_phases,
    train_in_phases,
)
from tpu_pipeline.components.training.input_pipeline import EvalInput
from tpu_pipeline.components.training.learning_rate import peak_learning_rate

BATCH, STEPS = 8, 2
IMAGES = np.random.default_rng(0).random((BATCH * STEPS, 8, 8, 1), dtype=np.float32)
LABELS = np.arange(BATCH * STEPS) % 10


def _model() -> tf_keras.Model:
    tf_keras.utils.set_random_seed(3)
    layers = tf_keras.layers
    features_in = tf_keras.Input((8, 8, 1))
    x = layers.Conv2D(4, 3, padding="same", name="conv")(features_in)
    x = layers.BatchNormalization(name="bn")(x)
    backbone = tf_keras.Model(features_in, layers.ReLU()(x), name=BACKBONE_LAYER)
    inputs = tf_keras.Input((8, 8, 1))
    x = layers.GlobalAveragePooling2D()(backbone(inputs))
    x = layers.Dense(10, name="logits")(x)
    return tf_keras.Model(inputs, layers.Activation("softmax", dtype="float32")(x))


def _training_data(interrupt_in_call: int | None = None) -> tf.data.Dataset:
    """Endless batches; the `interrupt_in_call`-th iterator fails at its third batch (a kill)."""
    calls = []

    def batches():
        calls.append(None)
        for step in itertools.count():
            if len(calls) == interrupt_in_call and step == STEPS:
                raise RuntimeError("the Trainer was killed")
            index = step % STEPS
            yield (
                IMAGES[index * BATCH : (index + 1) * BATCH],
                LABELS[index * BATCH : (index + 1) * BATCH],
            )

    signature = (
        tf.TensorSpec((BATCH, 8, 8, 1), tf.float32),
        tf.TensorSpec((BATCH,), tf.int64),
    )
    return tf.data.Dataset.from_generator(batches, output_signature=signature)


def _eval_input() -> EvalInput:
    data = tf.data.Dataset.from_tensor_slices((IMAGES, LABELS, np.ones(len(LABELS), np.float32)))
    return EvalInput(data.batch(BATCH), len(LABELS))


def _config(epochs: int, frozen: int, loop: str = "fit") -> TrainerConfig:
    # A placeholder file name: these tests hand the phases a model whose weights are set.
    return TrainerConfig(
        model="mobilenet_v2",
        pretrained_weights="backbone.h5",
        epochs=epochs,
        frozen_backbone_epochs=frozen,
        warmup_epochs=0,
        loop=loop,
    )


def _train(model, config, tmp_path, data=None):
    return train_in_phases(
        model,
        data or _training_data(),
        _eval_input(),
        strategy=tf.distribute.get_strategy(),
        policy=TrainingPolicy(jit_compile=False, precision="float32"),
        config=config,
        steps_per_epoch=STEPS,
        batch_size=BATCH,
        log_dir=str(tmp_path / "logs"),
        backup_dir=str(tmp_path / "backup"),
    )


def _values(layer: tf_keras.layers.Layer) -> dict[str, np.ndarray]:
    return {weight.name: weight.numpy() for weight in layer.weights}


def _changed(before: dict[str, np.ndarray], layer: tf_keras.layers.Layer) -> set[str]:
    return {
        name for name, value in _values(layer).items() if not np.array_equal(value, before[name])
    }


@pytest.mark.parametrize("loop", ["fit", "custom"])
def test_the_frozen_phase_trains_the_head_and_leaves_the_backbone_as_it_was(tmp_path, loop):
    model = _model()
    backbone, head = model.get_layer(BACKBONE_LAYER), model.get_layer("logits")
    backbone_before, head_before = _values(backbone), _values(head)

    history = _train(model, _config(epochs=1, frozen=1, loop=loop), tmp_path)

    assert _changed(backbone_before, backbone) == set()  # kernels and BatchNorm statistics
    assert _changed(head_before, head) == {"logits/kernel:0", "logits/bias:0"}
    assert history.history["backbone_trainable"] == [0.0]


@pytest.mark.parametrize("loop", ["fit", "custom"])
def test_the_fine_tuning_phase_trains_the_backbone_at_the_lower_rate_but_keeps_batchnorm(
    tmp_path, loop, caplog
):
    model = _model()
    backbone = model.get_layer(BACKBONE_LAYER)
    before = _values(backbone)
    config = _config(epochs=2, frozen=1, loop=loop)

    with caplog.at_level(logging.INFO, logger="absl"):
        history = _train(model, config, tmp_path)

    changed = _changed(before, backbone)
    assert {"conv/kernel:0", "conv/bias:0"} <= changed
    # BatchNorm stays in inference mode with its pretrained statistics, and is not trained.
    assert not any(name.startswith("bn/") for name in changed)
    assert history.epoch == [0, 1]
    assert history.history["backbone_trainable"] == [0.0, 1.0]
    epoch_lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("epoch ")]
    assert [line.split(": ")[0] for line in epoch_lines] == ["epoch 1/2", "epoch 2/2"]
    assert f"({FROZEN_BACKBONE}; " in epoch_lines[0] and f"({FINE_TUNE}; " in epoch_lines[1]
    # The fine-tuning optimizer is the second phase's own, at a tenth of the recipe's peak.
    assert int(model.optimizer.iterations) == STEPS
    assert model.optimizer._learning_rate.peak == pytest.approx(
        0.1 * peak_learning_rate(config, BATCH)
    )
    assert not os.path.exists(tmp_path / "backup" / FROZEN_BACKBONE)  # removed once finished


@pytest.mark.parametrize("loop", ["fit", "custom"])
def test_without_a_frozen_backbone_a_training_is_one_phase_of_all_its_epochs(tmp_path, loop):
    model = _model()
    backbone = model.get_layer(BACKBONE_LAYER)
    before = _values(backbone)
    config = _config(epochs=2, frozen=0, loop=loop)

    history = _train(model, config, tmp_path)

    assert history.epoch == [0, 1] and "backbone_trainable" not in history.history
    assert {"conv/kernel:0", "conv/bias:0"} <= _changed(before, backbone)  # nothing frozen
    # Compiled once, with the recipe's own optimizer over every step of the run.
    assert int(model.optimizer.iterations) == 2 * STEPS
    assert model.optimizer._learning_rate.peak == pytest.approx(peak_learning_rate(config, BATCH))
    assert not os.path.exists(tmp_path / "backup" / FROZEN_BACKBONE)


@pytest.mark.parametrize("loop", ["fit", "custom"])
def test_a_restart_in_the_fine_tuning_phase_replays_no_epoch_of_either_phase(
    tmp_path, loop, caplog
):
    config = _config(epochs=3, frozen=1, loop=loop)
    # Phase 1 draws from the first iterator; phase 2's (the second) dies during epoch 3.
    with pytest.raises((tf.errors.OpError, RuntimeError)):
        _train(_model(), config, tmp_path, _training_data(interrupt_in_call=2))
    assert os.path.isdir(tmp_path / "backup" / FROZEN_BACKBONE)  # kept for this restart
    caplog.clear()

    with caplog.at_level(logging.INFO, logger="absl"):
        history = _train(_model(), config, tmp_path)

    epoch_lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("epoch ")]
    assert [line.split(": ")[0] for line in epoch_lines] == ["epoch 3/3"]
    assert history.epoch == [2]
    assert not os.path.exists(tmp_path / "backup" / FROZEN_BACKBONE)


def test_phases_follow_the_configuration():
    assert fine_tuning_phases(TrainerConfig(model="resnet50", epochs=4)) == []
    only_head = fine_tuning_phases(_config(epochs=2, frozen=2))
    assert [(p.name, p.first_epoch, p.end_epoch, p.keep_backup) for p in only_head] == [
        (FROZEN_BACKBONE, 0, 2, False)
    ]
    described = describe_phases(_config(epochs=5, frozen=2), global_batch_size=64)
    assert described == [
        {
            "phase": FROZEN_BACKBONE,
            "epochs": [1, 2],
            "backbone_trainable": False,
            "peak_learning_rate": pytest.approx(2e-3),
        },
        {
            "phase": FINE_TUNE,
            "epochs": [3, 5],
            "backbone_trainable": True,
            "peak_learning_rate": pytest.approx(2e-4),
        },
    ]


def test_fine_tuning_fields_that_cannot_work_are_refused_naming_the_field():
    with pytest.raises(ConfigError, match=r"frozen_backbone_epochs \(6\) must be at most epochs"):
        load_config(
            None,
            {
                "trainer.model": "resnet50",
                "trainer.pretrained_weights": "imagenet",
                "trainer.frozen_backbone_epochs": 6,
                "trainer.epochs": 5,
            },
        )
    with pytest.raises(ConfigError, match="frozen_backbone_epochs needs pretrained_weights"):
        load_config(None, {"trainer.model": "resnet50", "trainer.frozen_backbone_epochs": 1})
    with pytest.raises(ConfigError, match="trainer.fine_tune_learning_rate_factor"):
        load_config(None, {"trainer.fine_tune_learning_rate_factor": 2})
