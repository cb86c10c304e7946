"""Pushing: atomic versions, never the same model twice, nothing half-written."""

import os

import pytest
import tensorflow as tf

from components import pusher
from components.pusher import push_model_version, pushed_versions


def save_model(path, value: float) -> str:
    module = tf.Module()
    module.weight = tf.Variable(value)
    module.predict = tf.function(
        lambda x: x * module.weight, input_signature=[tf.TensorSpec([None])]
    )
    tf.saved_model.save(module, str(path))
    return str(path)


class Clock:
    def __init__(self, now: int):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_first_push_creates_a_numbered_version_with_the_whole_model(tmp_path):
    model = save_model(tmp_path / "model", 1.0)
    result = push_model_version(model, str(tmp_path / "serving"), clock=Clock(1000))
    assert result.newly_pushed and result.version == "1000"
    assert pushed_versions(str(tmp_path / "serving")) == ["1000"]
    loaded = tf.saved_model.load(result.version_dir)
    assert float(loaded.predict(tf.constant([2.0]))[0]) == 2.0


def test_the_same_model_is_not_pushed_twice(tmp_path):
    model = save_model(tmp_path / "model", 1.0)
    first = push_model_version(model, str(tmp_path / "serving"), clock=Clock(1000))
    again = push_model_version(model, str(tmp_path / "serving"), clock=Clock(2000))
    assert not again.newly_pushed
    assert again.version_dir == first.version_dir
    assert pushed_versions(str(tmp_path / "serving")) == ["1000"]


def test_a_model_with_other_weights_gets_a_later_version_even_if_the_clock_lags(tmp_path):
    serving = str(tmp_path / "serving")
    push_model_version(save_model(tmp_path / "a", 1.0), serving, clock=Clock(1000))
    second = push_model_version(save_model(tmp_path / "b", 3.0), serving, clock=Clock(900))
    assert second.newly_pushed and second.version == "1001"
    assert pushed_versions(serving) == ["1000", "1001"]


def test_a_failed_copy_leaves_no_version_and_no_staging_folder(tmp_path, monkeypatch):
    serving = tmp_path / "serving"
    push_model_version(save_model(tmp_path / "a", 1.0), str(serving), clock=Clock(1000))
    real_copy = pusher.io_utils.copy_dir

    def copy_then_fail(source, destination):
        real_copy(source, destination)
        raise OSError("disk full")

    monkeypatch.setattr(pusher.io_utils, "copy_dir", copy_then_fail)
    with pytest.raises(OSError, match="disk full"):
        push_model_version(save_model(tmp_path / "b", 2.0), str(serving), clock=Clock(2000))
    assert sorted(os.listdir(serving)) == ["1000"]
