"""Backups let an interrupted training resume; the key keeps trainings apart."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from tpu_pipeline.common.config import TrainerConfig
from tpu_pipeline.components.device.policy import DEVICE_DEFAULTS
from tpu_pipeline.components.models import build_model, compile_model
from tpu_pipeline.components.training import training_logs
from tpu_pipeline.components.training.input_pipeline import EvalInput
from tpu_pipeline.components.training.learning_rate import WarmupThenDecay, make_optimizer
from tpu_pipeline.components.training.loop import train
from tpu_pipeline.components.training.setup import backup_dir_for


def test_backup_folder_is_stable_for_a_retry_and_distinct_for_other_inputs(tmp_path):
    inputs = {"train_files": ["a"], "train_steps": 10}
    first = backup_dir_for(str(tmp_path / "model_run" / "7"), inputs)
    retry = backup_dir_for(str(tmp_path / "model_run" / "8"), inputs)
    other = backup_dir_for(str(tmp_path / "model_run" / "8"), {**inputs, "train_steps": 11})
    assert first == retry != other
    assert first.startswith(str(tmp_path / "model_run" / "backup"))


def optimizer_schedule(config: TrainerConfig) -> dict:
    return make_optimizer(config, 16, steps_per_epoch=4, total_steps=16)._learning_rate.get_config()


class InterruptAfterEpoch(tf_keras.callbacks.Callback):
    def __init__(self, epoch: int):
        super().__init__()
        self.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        if epoch == self.epoch:
            raise KeyboardInterrupt("preempted")


@pytest.mark.parametrize(
    ("loop", "pipeline_root"),
    [("fit", "local"), ("custom", "local"), ("fit", "ram://spot"), ("custom", "ram://spot")],
    ids=["fit", "custom", "fit-spot-object-store", "custom-spot-object-store"],
)
def test_an_interrupted_training_resumes_at_its_last_finished_epoch(
    tmp_path, monkeypatch, loop, pipeline_root
):
    """A preempted (Spot) job restarts with the same inputs and resumes from its backup.

    On Vertex AI the backup lives under the pipeline root in Cloud Storage; TensorFlow's
    in-memory `ram://` filesystem stands in for it, so no step may assume a local path.
    """
    root = str(tmp_path) if pipeline_root == "local" else f"{pipeline_root}/{tmp_path.name}"
    backup_dir = backup_dir_for(f"{root}/Trainer/model_run/7", {"train_steps": 16})
    images = np.random.default_rng(0).random((64, 8, 8, 1), dtype=np.float32)
    labels = np.arange(64) % 10
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).batch(16, drop_remainder=True)
    weights = tf.ones(64, tf.float32)
    eval_batches = tf.data.Dataset.from_tensor_slices((images, labels, weights)).batch(16)
    eval_input = EvalInput(eval_batches, 64)
    config = TrainerConfig(train_steps=16, epochs=4, loop=loop)
    arguments = dict(
        strategy=tf.distribute.get_strategy(),
        policy=DEVICE_DEFAULTS["cpu"],
        config=config,
        steps_per_epoch=4,
        batch_size=16,
        log_dir=str(tmp_path / "logs"),
        backup_dir=backup_dir,
    )

    def fresh_model():
        model = build_model("mnist_cnn", (8, 8, 1), 10)
        optimizer = make_optimizer(config, 16, steps_per_epoch=4, total_steps=16)
        compile_model(model, optimizer, jit_compile=False, precision="float32")
        return model

    real_callbacks = training_logs.training_callbacks
    monkeypatch.setattr(
        "tpu_pipeline.components.training.loop.training_callbacks",
        lambda *args: [*real_callbacks(*args), InterruptAfterEpoch(1)],
    )
    with pytest.raises(KeyboardInterrupt):
        train(fresh_model(), dataset.repeat(), eval_input, **arguments)
    monkeypatch.setattr("tpu_pipeline.components.training.loop.training_callbacks", real_callbacks)
    assert tf.io.gfile.listdir(backup_dir)  # the epoch-2 backup is where the restart looks

    history = train(fresh_model(), dataset.repeat(), eval_input, **arguments)
    assert history.epoch == [2, 3]
    # The schedule resumed at the restored step: the rate logged per epoch keeps decaying.
    schedule = WarmupThenDecay(**optimizer_schedule(config))
    np.testing.assert_allclose(
        history.history["learning_rate"], [float(schedule(11)), float(schedule(15))], rtol=1e-5
    )
    assert not tf.io.gfile.exists(backup_dir) or not tf.io.gfile.listdir(backup_dir)


def _histograms(run_dir) -> dict[tuple[str, int], np.ndarray]:
    """Every histogram summary in a TensorBoard run folder, by (tag, step)."""
    found = {}
    for path in tf.io.gfile.glob(f"{run_dir}/events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.metadata.plugin_data.plugin_name == "histograms":
                    found[(value.tag, event.step)] = tf.make_ndarray(value.tensor)
    return found


def test_weight_histograms_match_keras_own_for_every_weight_and_epoch(tmp_path):
    """The histograms counted on the host write what Keras's eager ones write: tags, buckets."""
    images = np.random.default_rng(0).random((32, 8, 8, 1), dtype=np.float32)
    labels = np.arange(32) % 10
    logged = {}
    for name, callback in [
        ("ours", training_logs.TensorBoard),
        ("keras", tf_keras.callbacks.TensorBoard),
    ]:
        tf_keras.utils.set_random_seed(0)
        model = build_model("cnn_bn", (8, 8, 1), 10)
        compile_model(model, tf_keras.optimizers.SGD(0.1), jit_compile=False, precision="float32")
        log_dir = tmp_path / name
        board = callback(log_dir=str(log_dir), histogram_freq=1, update_freq="epoch")
        model.fit(
            images, labels, batch_size=16, epochs=2, shuffle=False, verbose=0, callbacks=[board]
        )
        logged[name] = _histograms(log_dir / "train")
    weights = len(model.weights)
    assert len(logged["ours"]) == 2 * weights  # every weight, at both epochs
    assert logged["ours"].keys() == logged["keras"].keys()
    for key, buckets in logged["keras"].items():
        np.testing.assert_allclose(logged["ours"][key], buckets, rtol=1e-6, err_msg=str(key))


class _WithAnEmptyWeight(tf_keras.layers.Layer):
    """Passes its input on; holds a weight of no values (as a zero-width layer would)."""

    def build(self, input_shape):
        self.nothing = self.add_weight(name="nothing", shape=(0,))

    def call(self, inputs):
        return inputs


def test_an_empty_weight_gets_an_all_zero_histogram_and_training_goes_on(tmp_path):
    inputs = tf_keras.Input((3,))
    model = tf_keras.Model(
        inputs, tf_keras.layers.Dense(3)(_WithAnEmptyWeight(name="empty")(inputs))
    )
    model.compile(loss="mse")
    board = training_logs.TensorBoard(log_dir=str(tmp_path), histogram_freq=1)
    model.fit(np.zeros((4, 3)), np.zeros((4, 3)), epochs=1, verbose=0, callbacks=[board])

    buckets = _histograms(tmp_path / "train")[("empty/nothing_0/histogram", 0)]
    assert buckets.shape == (30, 3) and not buckets.any()


def test_weight_histograms_are_drawn_from_at_most_max_values_of_each_weight(tmp_path):
    inputs = tf_keras.Input((50,))
    model = tf_keras.Model(inputs, tf_keras.layers.Dense(40, name="wide")(inputs))
    model.compile(loss="mse")
    board = training_logs.TensorBoard(
        log_dir=str(tmp_path), histogram_freq=1, max_histogram_values=300
    )
    model.fit(np.zeros((4, 50)), np.zeros((4, 40)), epochs=1, verbose=0, callbacks=[board])

    counts = {
        tag: int(buckets[:, 2].sum())  # [bucket, (left, right, count)]
        for (tag, _), buckets in _histograms(tmp_path / "train").items()
    }
    # The 2,000-value kernel is sampled every 7th value (286 values); the 40 biases whole.
    assert counts == {"wide/kernel_0/histogram": 286, "wide/bias_0/histogram": 40}
