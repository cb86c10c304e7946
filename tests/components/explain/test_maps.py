"""The attribution methods on models whose answer is known to depend on chosen pixels."""

import numpy as np
import pytest
import tensorflow as tf

from tpu_pipeline.common.config import ConfigError, ExplainConfig, load_config
from tpu_pipeline.components.explain.maps import (
    MAX_STEP_BATCH,
    NoGradientError,
    attribution_map,
    baseline_images,
    integrated_gradients,
    model_function,
    pixel_range,
    require_grad_cam_layer,
)
from tpu_pipeline.components.images.batching import images_per_call


def _linear_softmax(weights: np.ndarray):
    """A 'model' whose class-1 logit is the weighted sum of its pixels (class 0 is zero)."""
    flat = tf.constant(weights.reshape(-1), tf.float32)

    def classify(pixels: tf.Tensor) -> tf.Tensor:
        logit = tf.reduce_sum(tf.reshape(pixels, [tf.shape(pixels)[0], -1]) * flat, axis=1)
        return tf.nn.softmax(tf.stack([tf.zeros_like(logit), logit], axis=1))

    return classify


def test_integrated_gradients_add_up_to_the_change_of_the_answer_from_the_baseline():
    """Completeness: the attributions sum to p(image) - p(baseline) for the class explained."""
    rng = np.random.default_rng(0)
    weights = rng.normal(0, 0.3, (8, 8, 1))
    classify = _linear_softmax(weights)
    image = rng.uniform(0, 16, (8, 8, 1)).astype(np.float32)
    baseline = np.zeros_like(image)
    for target in (0, 1):
        attribution = integrated_gradients(model_function(classify), image, target, baseline, 256)
        answer = classify(tf.constant(np.stack([image, baseline])))[:, target].numpy()
        assert attribution.sum() == pytest.approx(answer[0] - answer[1], abs=1e-2)


@pytest.mark.parametrize(("side", "most"), [(8, 32), (64, 32), (128, 24), (224, 8), (640, 1)])
def test_large_photos_are_sent_to_the_model_a_few_steps_at_a_time(side, most):
    """A gradient call holds every image's activations: its pixels are bounded, not its steps,
    and the attribution is the same however the steps are batched."""
    rng = np.random.default_rng(0)
    weights = rng.normal(0, 1e-5, (side, side, 3))
    linear = _linear_softmax(weights)
    sent = []

    def classify(pixels: tf.Tensor) -> tf.Tensor:
        sent.append(int(pixels.shape[0]))
        return linear(pixels)

    image = rng.uniform(0, 255, (side, side, 3)).astype(np.float32)
    baseline = np.zeros_like(image)
    attribution = integrated_gradients(model_function(classify), image, 1, baseline, 32)
    assert (
        images_per_call(image.shape, MAX_STEP_BATCH) == most
        and max(sent) == most
        and sum(sent) == 32
    )
    answer = linear(tf.constant(np.stack([image, baseline])))[:, 1].numpy()
    assert attribution.sum() == pytest.approx(answer[0] - answer[1], abs=1e-3)


def test_the_map_lights_only_the_pixels_the_answer_depends_on():
    weights = np.zeros((8, 8, 1))
    weights[2, 5, 0], weights[6, 1, 0] = 0.5, -0.5
    image = np.full((8, 8, 1), 4.0, np.float32)
    blank = baseline_images(("black",), load_config(None, {}).dataset)
    found = attribution_map(
        model_function(_linear_softmax(weights)), image, 1, "integrated_gradients", 32, blank
    )
    assert found.shape == (8, 8) and found.max() == pytest.approx(1.0)
    lit = found > 0.01
    assert lit[2, 5] and lit[6, 1] and lit.sum() == 2


def test_xrai_ranks_the_region_the_answer_depends_on_first():
    """Photo-sized: the answer reads a bright square; XRAI's top region is that square."""
    weights = np.zeros((64, 64, 3))
    weights[8:24, 8:24, :] = 0.002
    image = np.full((64, 64, 3), 40.0, np.float32)
    image[8:24, 8:24, :] = 220.0  # a square the segmentation can find
    photos = load_config(None, {"dataset": "signs"}).dataset
    found = attribution_map(
        model_function(_linear_softmax(weights)),
        image,
        1,
        "xrai",
        16,
        baseline_images(("black", "white"), photos),
    )
    assert found.shape == (64, 64) and 0 <= found.min() and found.max() <= 1
    assert found[8:24, 8:24].mean() > found[40:, 40:].mean() + 0.3


def test_a_model_without_a_gradient_is_one_clear_error():
    def rounded(pixels):  # tf.round has no gradient
        return tf.nn.softmax(tf.reshape(tf.round(pixels), [tf.shape(pixels)[0], -1])[:, :2])

    call_model = model_function(rounded)
    with pytest.raises(NoGradientError, match="explain.mistakes=0"):
        call_model(np.zeros((2, 8, 8, 1), np.float32), {"class": 0})


def test_baselines_are_the_darkest_and_brightest_pixel_the_signature_takes():
    digits, photos = (load_config(None, {"dataset": d}).dataset for d in ("digits", "signs"))
    assert pixel_range(photos) == (0.0, 255.0)
    assert pixel_range(digits) == digits.source.image_value_range
    black, white = baseline_images(("black", "white"), photos)
    assert black.shape == photos.image_shape and black.max() == 0 and white.min() == 255


def test_auto_picks_integrated_gradients_for_pixel_data_and_xrai_for_photos():
    settings = ExplainConfig()
    assert settings.method_for(photos=False) == "integrated_gradients"
    assert settings.method_for(photos=True) == "xrai"
    assert settings.baselines_for("integrated_gradients") == ("black",)
    assert settings.baselines_for("xrai") == ("black", "white")
    chosen = ExplainConfig(method="xrai", baselines=("white",))
    assert chosen.method_for(photos=False) == "xrai" and chosen.baselines_for("xrai") == ("white",)
    assert ExplainConfig().enabled and not ExplainConfig(mistakes=0, correct_per_class=0).enabled


class _KeptFeatureMaps:
    """A served model's kept feature maps: two 2x2 maps, the class weighing only the first."""

    maps = np.array([[[1.0, 0.0], [0.0, 0.0]], [[0.0, 0.0], [0.0, 1.0]]]).transpose(1, 2, 0)

    def __call__(self, pixels):  # the pixels signature (unused by Grad-CAM)
        return tf.ones([tf.shape(pixels)[0], 2])

    def feature_map_gradients(self, pixels, target):
        gradients = np.zeros_like(self.maps)
        gradients[..., 0] = 1.0 if target == 1 else -1.0
        batch = pixels.shape[0]
        return {
            "feature_maps": tf.constant(np.repeat(self.maps[None], batch, 0), tf.float32),
            "gradients": tf.constant(np.repeat(gradients[None], batch, 0), tf.float32),
        }


def test_grad_cam_lights_where_the_weighed_feature_map_is_and_nothing_for_negative_evidence():
    image = np.zeros((8, 8, 1), np.float32)
    call_model = model_function(_KeptFeatureMaps())

    heat = attribution_map(call_model, image, 1, "grad_cam", 32, [])
    assert heat.shape == (8, 8) and heat.max() == pytest.approx(1.0)
    assert heat[:4, :4].mean() > 0.5 > heat[4:, 4:].mean()  # the first map's corner
    against = attribution_map(call_model, image, 0, "grad_cam", 32, [])
    assert not against.any()  # only negative evidence: Grad-CAM's ReLU keeps nothing


def test_the_pipeline_refuses_before_training_a_grad_cam_it_could_not_draw(tmp_path):
    from tpu_pipeline.pipeline.wiring.graph import create_pipeline

    dataset = load_config(None, {}).dataset  # the digits, cnn_bn's shape
    require_grad_cam_layer(ExplainConfig(method="grad_cam"), "cnn_bn", dataset)  # has one
    require_grad_cam_layer(ExplainConfig(), "no such model", dataset)  # not asked: not built
    with pytest.raises(ValueError, match="'nowhere' is not a feature-map layer"):
        require_grad_cam_layer(ExplainConfig(grad_cam_layer="nowhere"), "cnn_bn", dataset)
    with pytest.raises(ValueError, match="needs a feature-map layer, and .* has none"):
        require_grad_cam_layer(
            ExplainConfig(method="grad_cam"), "tests.components.user_models:huge_dense", dataset
        )
    # The Trainer's export keeps the layer: a wrong one fails when the pipeline is built.
    wrong = load_config(None, {"explain.grad_cam_layer": "nowhere"})
    with pytest.raises(ConfigError, match="'nowhere' is not a feature-map layer"):
        create_pipeline(
            wrong, data_root=".", pipeline_root=str(tmp_path), serving_dir=str(tmp_path)
        )
