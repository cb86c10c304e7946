"""A few numbers per image, and per prediction, whose distributions say when data has moved.

Labels are not needed: a folder of letters given to a digits model changes how its
pixels are spread and how sure the model is, long before anyone labels a prediction.
Each signal is cheap and catches one kind of change a team meets:

- `brightness` and `contrast` (mean and spread of the luminance): exposure, lighting,
  inverted or washed-out images;
- `channel_<c>_mean` and `channel_<c>_spread` for colour images: a colour cast, another
  camera's white balance, grayscale images given to a colour model;
- `sharpness` (mean absolute difference of neighbouring pixels): blur, upscaled
  thumbnails, another resolution or noise;
- `image_size` and `image_format` for photos (what ExampleGen stored about each
  file): another camera, screenshots, thumbnails;
- `confidence` (the top probability), `unsure` (whether it is under
  `drift.low_confidence`) and `predicted_class`: what the model makes of the images,
  the first to move when they are of a kind it never saw.

Pixel values are those of the `pixels` signature: as the data stores them (0..16 for
the built-in digits, 0..255 for photos), so the reference and a job compare like with like.
"""

from __future__ import annotations

import numpy as np

# ITU-R BT.601 luma weights: how bright an RGB pixel looks.
_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)
IMAGE_SIZE = "image_size"  # photos: the stored file's WIDTHxHEIGHT
PREDICTED_CLASS = "predicted_class"
CONFIDENCE = "confidence"
UNSURE = "unsure"


def pixel_signals(pixels: np.ndarray) -> dict[str, np.ndarray]:
    """Per image of `pixels` [n, height, width, channels], its pixel signals (float64 [n])."""
    pixels = np.asarray(pixels, dtype=np.float32)
    channels = pixels.shape[-1]
    luminance = pixels @ _LUMA if channels == 3 else pixels.mean(axis=-1)
    signals = {
        "brightness": luminance.mean(axis=(1, 2)),
        "contrast": luminance.std(axis=(1, 2)),
        "sharpness": _sharpness(luminance),
    }
    if channels > 1:
        for channel in range(channels):
            values = pixels[..., channel]
            signals[f"channel_{channel}_mean"] = values.mean(axis=(1, 2))
            signals[f"channel_{channel}_spread"] = values.std(axis=(1, 2))
    return {name: values.astype(np.float64) for name, values in signals.items()}


def _sharpness(luminance: np.ndarray) -> np.ndarray:
    """Mean absolute difference between neighbouring pixels, across and down; 0 for 1x1."""
    across = np.abs(np.diff(luminance, axis=2)).mean(axis=(1, 2)) if luminance.shape[2] > 1 else 0
    down = np.abs(np.diff(luminance, axis=1)).mean(axis=(1, 2)) if luminance.shape[1] > 1 else 0
    return np.zeros(len(luminance)) + (across + down) / 2


def prediction_signals(
    probabilities: np.ndarray, class_names: tuple[str, ...] | list[str]
) -> dict[str, np.ndarray]:
    """Per row of `probabilities` [n, classes]: the predicted class's name and the top
    probability."""
    probabilities = np.asarray(probabilities, dtype=np.float64)
    return {
        PREDICTED_CLASS: np.asarray(class_names, dtype=object)[probabilities.argmax(axis=-1)],
        CONFIDENCE: probabilities.max(axis=-1),
    }


def with_unsure(signals: dict[str, np.ndarray], low_confidence: float) -> dict[str, np.ndarray]:
    """`signals` and `unsure`: "yes" where the confidence is under `low_confidence`.

    Derived when compared, not stored: the threshold is the job's setting.
    """
    unsure = np.where(signals[CONFIDENCE] < low_confidence, "yes", "no").astype(object)
    return {**signals, UNSURE: unsure}
