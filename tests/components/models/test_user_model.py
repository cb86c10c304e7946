"""The user's own model (`trainer.model: package.module:function`) is built like a built-in."""

import numpy as np
import pytest

from tpu_pipeline.common.config import ConfigError, load_config
from tpu_pipeline.components.models import build_model, check_model, serving_copy, user_model_source

USER = "tests.components.user_models"


def test_user_model_gets_the_precision_policy_and_a_float32_softmax():
    model = build_model(f"{USER}:small_cnn", (8, 8, 1), 10, precision="mixed_bfloat16")
    nested = model.layers[1]
    assert nested.get_layer("user_conv").compute_dtype == "bfloat16"
    assert all(weight.dtype == "float32" for weight in model.weights)
    assert model.output.dtype == "float32" and model.output.shape.as_list() == [None, 10]
    images = np.random.default_rng(0).random((4, 8, 8, 1), dtype=np.float32)
    np.testing.assert_allclose(model.predict(images, verbose=0).sum(axis=1), 1.0, rtol=1e-3)


def test_serving_copy_of_a_user_model_predicts_like_the_trained_one():
    dataset = load_config().dataset
    trained = build_model(f"{USER}:small_cnn", dataset.image_shape, 10, "mixed_bfloat16")
    copy = serving_copy(trained.get_weights(), f"{USER}:small_cnn", dataset)
    images = np.random.default_rng(1).random((4, *dataset.image_shape), dtype=np.float32)
    assert copy.layers[1].get_layer("user_conv").compute_dtype == "float32"
    np.testing.assert_allclose(
        copy.predict(images, verbose=0), trained.predict(images, verbose=0), atol=2e-2
    )


@pytest.mark.parametrize(
    ("function", "message"),
    [
        ("too_few_arguments", r"must be callable as too_few_arguments\(image_shape, num_classes\)"),
        ("no_such_function", r".*user_models.py\) has no function no_such_function"),
        ("wrong_output_shape", r"returns shape \(None, 11\) .*expected \(None, 10\)"),
        ("returns_probabilities", r"its last layer applies softmax; return logits"),
        ("returns_a_layer", r"returned .*Dense; expected an uncompiled tf_keras.Model"),
        ("fixed_input_shape", r"cannot take images of shape \(8, 8, 1\)"),
    ],
)
def test_a_broken_user_model_is_named_with_what_is_wrong(function, message):
    with pytest.raises(ConfigError, match=rf"trainer.model '{USER}:{function}': {message}"):
        build_model(f"{USER}:{function}", (8, 8, 1), 10)


def test_a_module_that_cannot_be_imported_fails_before_any_component_runs():
    with pytest.raises(ConfigError, match=r"cannot import no_such_package.models: .*PYTHONPATH"):
        check_model("no_such_package.models:build")


def test_config_accepts_module_function_references_and_rejects_other_text():
    config = load_config(None, {"trainer.model": f"{USER}:small_cnn"})
    assert config.trainer.model == f"{USER}:small_cnn"
    with pytest.raises(ConfigError, match="trainer.model"):
        load_config(None, {"trainer.model": "my models/cnn.py"})


def test_the_cache_fingerprint_covers_the_users_whole_top_level_package():
    # `tests.components.user_models` lives in the `tests` package: all of it is hashed.
    source = user_model_source(f"{USER}:small_cnn")
    assert source.is_dir() and (source / "components" / "user_models.py").exists()
