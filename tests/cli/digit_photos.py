"""Real digits (scikit-learn's 8x8) as PNG photos in folders, as a user would have them."""

from __future__ import annotations

import pathlib

import numpy as np
from PIL import Image
from sklearn.datasets import load_digits


def write_digit_photos(
    folder: pathlib.Path, per_class: int, classes: dict[str, int] | None = None
) -> pathlib.Path:
    """Writes `per_class` digits of each class into `folder/<name>/`, for the digits of
    `classes` ({folder name: digit}; default: "0".."9"), or straight into `folder` when the
    name is "" (a flat folder without classes). Pixels 0..16 become 0..255 gray."""
    digits = load_digits()
    classes = classes if classes is not None else {str(d): d for d in range(10)}
    for name, digit in classes.items():
        target = folder / name
        target.mkdir(parents=True, exist_ok=True)
        chosen = np.flatnonzero(digits.target == digit)[:per_class]
        for index in chosen:
            pixels = np.round(digits.images[index] * 255 / 16).astype(np.uint8)
            Image.fromarray(pixels, "L").save(target / f"digit-{index}.png")
    return folder
