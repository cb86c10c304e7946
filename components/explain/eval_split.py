"""The Explainer's step: explains the served model's answers on the eval split.

It searches the first `explain.examined_examples` eval answers for the most
confident mistakes and the most confident right answers per class
(`choice.py`), reads those images again and maps each one (`maps.py`) into the
Explainer's own artifact (`components/explainer.py`): part of the run, cached on its
own, compiled for Vertex like every step, and never pushed with the model.
"""

from __future__ import annotations

import time

import numpy as np
from absl import logging

from tpu_pipeline.common.config import DatasetConfig, ExplainConfig
from tpu_pipeline.components.explain.choice import Chosen, choose_answers
from tpu_pipeline.components.explain.maps import (
    attribution_map,
    baseline_images,
    model_function,
    pixel_range,
)
from tpu_pipeline.components.explain.store import Attributions, display_pixels, write_attributions
from tpu_pipeline.components.serving.answers import PixelClassifier, eval_answers, eval_pixels


def explain_images(
    classify: PixelClassifier,
    pixels: list[np.ndarray],
    chosen: list[Chosen],
    dataset: DatasetConfig,
    settings: ExplainConfig,
) -> Attributions:
    """Maps each of `pixels` for the class `chosen` says the model predicted."""
    method = settings.method_for(dataset.stores_encoded_images)
    baselines = settings.baselines_for(method)
    call_model = model_function(classify)
    started = time.monotonic()
    maps = [
        attribution_map(
            call_model,
            image,
            answer.predicted,
            method,
            settings.steps,
            baseline_images(baselines, dataset),
        )
        for image, answer in zip(pixels, chosen, strict=True)
    ]
    seconds = time.monotonic() - started
    # Which feature maps Grad-CAM weighed, for the report's caption.
    extra = {"layer": classify.grad_cam_layer} if method == "grad_cam" else {}
    low, high = pixel_range(dataset)
    height, width, _ = dataset.image_shape
    return Attributions(
        chosen=chosen,
        images=display_pixels(np.stack(pixels), low, high)
        if pixels
        else np.zeros((0, *dataset.image_shape), np.uint8),
        maps=np.stack(maps) if maps else np.zeros((0, height, width), np.float32),
        method=method,
        settings={
            "steps": settings.steps,
            "baselines": list(baselines),
            "seconds": seconds,
            "mistakes": settings.mistakes,
            "correct_per_class": settings.correct_per_class,
            **extra,
        },
    )


def explain_eval_split(
    attributions_dir: str,
    classify: PixelClassifier,
    eval_files: list[str],
    dataset: DatasetConfig,
    settings: ExplainConfig,
) -> Attributions | None:
    """Writes the attributions of the served model's eval answers into `attributions_dir`.

    `classify` is the served model, loaded. Returns the attributions, or None when
    `settings` explain nothing.
    """
    if not settings.enabled:
        return None
    probabilities, labels = eval_answers(classify, eval_files, dataset, settings.examined_examples)
    chosen = choose_answers(probabilities, labels, settings.mistakes, settings.correct_per_class)
    found = eval_pixels(eval_files, dataset, [c.index for c in chosen])
    attributions = explain_images(
        classify, [found[c.index] for c in chosen], chosen, dataset, settings
    )
    attributions.settings["examined_examples"] = len(labels)
    write_attributions(attributions_dir, attributions)
    mistakes = sum(c.mistake for c in chosen)
    logging.info(
        "Attributions: %d mistakes and %d right answers of %d eval examples, %s, %.1f s",
        mistakes,
        len(chosen) - mistakes,
        len(labels),
        attributions.method,
        attributions.settings["seconds"],
    )
    return attributions
