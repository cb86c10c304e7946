"""Attribution maps of the served model's answers, by PAIR's `saliency` methods.

The methods call the exported SavedModel's `pixels` signature and its gradient
(8-bit pixel data too: `components/serving/export.py`), so what is explained is
what is served, temperature scaling included. Each map is the method's own
visualisation, one value in [0, 1] per pixel:
- integrated gradients: |attribution| summed over the channels, clipped at its 99th
  percentile (`VisualizeImageGrayscale`), averaged over the baselines;
- XRAI: the attribution of the region each pixel belongs to, ranked and scaled
  (regions from Felzenszwalb's segmentation, integrated gradients inside);
- Grad-CAM: one layer's feature maps weighted by the mean gradient of the class's
  probability over each map, kept where positive and resized to the image; the maps
  and gradients come from the model's `pixels_feature_map_gradients` (export.py), as
  no signature gives a layer's gradient. One model call an image: the cheapest, and
  as coarse as the layer (2x2 for the digits' cnn_bn, 7x7 for MobileNetV2 at 224).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import saliency.core as saliency
import tensorflow as tf

from tpu_pipeline.common.config import (
    ConfigError,
    DatasetConfig,
    ExplainBaseline,
    ExplainConfig,
    ExplainMethod,
)
from tpu_pipeline.components.images.batching import images_per_call
from tpu_pipeline.components.models import build_model
from tpu_pipeline.components.serving.export import (
    FEATURE_MAPS_KEY,
    GRADIENTS_KEY,
    feature_map_layer,
)

TARGET_CLASS = "class"
# Integration steps sent to the model at once, for small images; fewer for large ones
# (`images_per_call`).
MAX_STEP_BATCH = 32


class NoGradientError(ValueError):
    """The served model cannot be differentiated with respect to its pixels."""


def require_grad_cam_layer(explain: ExplainConfig, model_name: str, dataset: DatasetConfig) -> None:
    """Fails when the pipeline is built, not after training, when Grad-CAM is asked for and
    the model has no layer to read (a misnamed `explain.grad_cam_layer`, or no feature maps
    at all). Builds the model only then.

    Raises:
      ConfigError: naming the problem and what to set instead.
    """
    wanted = explain.enabled and explain.method_for(dataset.stores_encoded_images) == "grad_cam"
    if not wanted and explain.grad_cam_layer is None:
        return
    model = build_model(model_name, dataset.image_shape, dataset.num_classes, "float32")
    try:
        layer = feature_map_layer(model, explain.grad_cam_layer)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    if layer is None:
        raise ConfigError(
            f"explain.method grad_cam needs a feature-map layer, and {model_name} has none: "
            "use explain.method=xrai or integrated_gradients"
        )


def pixel_range(dataset: DatasetConfig) -> tuple[float, float]:
    """The darkest and the brightest pixel the `pixels` signature takes: 0..255 for photos
    and 8-bit pixel data, `source.image_value_range` for other pixel data."""
    if dataset.stores_encoded_images or dataset.stores_8bit_pixels:
        return 0.0, 255.0
    return dataset.source.image_value_range


def baseline_images(
    baselines: tuple[ExplainBaseline, ...], dataset: DatasetConfig
) -> list[np.ndarray]:
    """One image of the dataset's shape per baseline: all darkest, or all brightest."""
    darkest, brightest = pixel_range(dataset)
    value = {"black": darkest, "white": brightest}
    return [np.full(dataset.image_shape, value[name], np.float32) for name in baselines]


def model_function(
    classify: Callable[[tf.Tensor], tf.Tensor],
) -> Callable[..., dict[str, np.ndarray]]:
    """`classify` (pixels -> probabilities) as the `call_model_function` the methods take:
    the gradient of the target class's probability with respect to the pixels, or for
    Grad-CAM a layer's feature maps and the gradient with respect to them (`classify`
    is then a `PixelClassifier`, which reads both from the exported model)."""

    def call_model(images, call_model_args=None, expected_keys=None):
        pixels = tf.convert_to_tensor(images, tf.float32)
        if saliency.CONVOLUTION_LAYER_VALUES in (expected_keys or ()):
            found = classify.feature_map_gradients(pixels, call_model_args[TARGET_CLASS])
            return {
                saliency.CONVOLUTION_LAYER_VALUES: found[FEATURE_MAPS_KEY].numpy(),
                saliency.CONVOLUTION_OUTPUT_GRADIENTS: found[GRADIENTS_KEY].numpy(),
            }
        with tf.GradientTape() as tape:
            tape.watch(pixels)
            answer = classify(pixels)[:, call_model_args[TARGET_CLASS]]
        gradient = tape.gradient(answer, pixels)
        if gradient is None:  # e.g. a user model with an op that has no gradient
            raise NoGradientError(
                "the model's pixels signature has no gradient with respect to its input, "
                "which attribution maps need; turn them off with explain.mistakes=0 and "
                "explain.correct_per_class=0"
            )
        return {saliency.INPUT_OUTPUT_GRADIENTS: gradient.numpy()}

    return call_model


def integrated_gradients(
    call_model: Callable, image: np.ndarray, target: int, baseline: np.ndarray, steps: int
) -> np.ndarray:
    """The raw integrated-gradients attribution [height, width, channels] of one image."""
    return saliency.IntegratedGradients().GetMask(
        image,
        call_model,
        {TARGET_CLASS: target},
        x_baseline=baseline,
        x_steps=steps,
        batch_size=images_per_call(image.shape, MAX_STEP_BATCH),
    )


def attribution_map(
    call_model: Callable,
    image: np.ndarray,
    target: int,
    method: ExplainMethod,
    steps: int,
    baselines: list[np.ndarray],
) -> np.ndarray:
    """The map [height, width] in [0, 1] of what drove `target`'s probability for `image`."""
    if method == "grad_cam":
        mask = saliency.GradCam().GetMask(
            image, call_model, {TARGET_CLASS: target}, should_resize=True, three_dims=False
        )
        return _scaled(mask)
    if method == "xrai":
        parameters = saliency.XRAIParameters(steps=steps)
        mask = saliency.XRAI().GetMask(
            image,
            call_model,
            {TARGET_CLASS: target},
            baselines=baselines,
            batch_size=images_per_call(image.shape, MAX_STEP_BATCH),
            extra_parameters=parameters,
        )
        return _scaled(mask)
    masks = [integrated_gradients(call_model, image, target, b, steps) for b in baselines]
    return saliency.VisualizeImageGrayscale(np.mean(masks, axis=0)).astype(np.float32)


def _scaled(mask: np.ndarray) -> np.ndarray:
    """`mask` stretched to [0, 1]; all zeros where it is flat."""
    low, high = float(mask.min()), float(mask.max())
    return ((mask - low) / (high - low) if high > low else np.zeros_like(mask)).astype(np.float32)
