"""AutoGraph leaves our graph-safe packages alone and still converts a user's own code."""

from __future__ import annotations

import tensorflow as tf
import tf_keras
from tensorflow.python.autograph.core import config as autograph_config
from tensorflow.python.autograph.impl import conversion

from tpu_pipeline.components.images import decode
from tpu_pipeline.components.training.autograph import (
    GRAPH_SAFE_PACKAGES,
    skip_autograph_for_graph_safe_code,
)


def user_function(x):
    """A user's function that needs AutoGraph: a Python `if` on a tensor's value."""
    if tf.reduce_sum(x) > 0:
        return x * 2
    return -x


def test_our_packages_are_skipped_and_a_users_function_is_still_converted():
    skip_autograph_for_graph_safe_code()

    assert conversion.is_allowlisted(decode.decode_encoded_image)
    assert conversion.is_allowlisted(tf_keras.layers.Dense(1).call)
    assert not conversion.is_allowlisted(user_function)
    traced = tf.function(user_function)
    assert traced(tf.constant([1.0, 2.0])).numpy().tolist() == [2.0, 4.0]
    assert traced(tf.constant([-1.0, -2.0])).numpy().tolist() == [1.0, 2.0]


def test_a_second_call_adds_no_rule():
    skip_autograph_for_graph_safe_code()
    rules = autograph_config.CONVERSION_RULES
    skip_autograph_for_graph_safe_code()

    assert autograph_config.CONVERSION_RULES == rules
    names = [str(rule) for rule in rules]
    for package in GRAPH_SAFE_PACKAGES:
        assert names.count(f"DoNotConvert rule for {package}") == 1
