"""Which TFLite variants are published, and how the choice is configured."""

from __future__ import annotations

import pytest

from common.config import ConfigError, load_config
from components.serving.tflite_variants import held_back_reason


def test_a_variant_within_the_bound_is_published_even_exactly_at_it():
    assert held_back_reason(0.99, 0.99, 0.01) is None
    assert held_back_reason(0.99, 0.98, 0.01) is None
    assert held_back_reason(0.99, 1.0, 0.0) is None


def test_a_variant_below_the_bound_is_held_back_saying_by_how_much():
    reason = held_back_reason(0.99, 0.97, 0.01)
    assert reason == (
        "accuracy 0.9700 is 0.0200 below the SavedModel's 0.9900 (serving.max_accuracy_drop: 0.01)"
    )


def test_variants_and_bound_are_configurable_and_checked():
    config = load_config(
        None, {"serving.tflite_variants": ["int8"], "serving.max_accuracy_drop": 0.05}
    )
    assert config.serving.tflite_variants == ("int8",)
    assert load_config().serving.tflite_variants == ("float32", "float16", "dynamic_int8", "int8")
    with pytest.raises(ConfigError, match="serving.tflite_variants"):
        load_config(None, {"serving.tflite_variants": ["int4"]})
    with pytest.raises(ConfigError, match="lists a variant twice"):
        load_config(None, {"serving.tflite_variants": ["int8", "int8"]})
    with pytest.raises(ConfigError, match="serving.max_accuracy_drop"):
        load_config(None, {"serving.max_accuracy_drop": 2})
