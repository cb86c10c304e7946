"""Where attributions are kept and how they are read back, without TensorFlow.

A folder of two files: `maps.npz` (the images as 8-bit pixels and their maps) and
`attributions.json` (what each image is, the method and its settings, the time it
took). The JSON is written last, so a folder without it is an unfinished step and
reads as None. The report reads the Explainer's artifact; `predict --explain` writes its own.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
from typing import Any

import numpy as np

from tpu_pipeline.common import fileio
from tpu_pipeline.components.explain.choice import Chosen

_MAPS_FILE = "maps.npz"
_INDEX_FILE = "attributions.json"
METHOD_NAMES = {
    "integrated_gradients": "integrated gradients",
    "xrai": "XRAI",
    "grad_cam": "Grad-CAM",
}


@dataclasses.dataclass
class Attributions:
    """Explained answers: image i is `chosen[i]`, drawn from `images[i]` and `maps[i]`."""

    chosen: list[Chosen]
    images: np.ndarray  # uint8 [n, height, width, channels], the pixels as the model saw them
    maps: np.ndarray  # float [n, height, width] in [0, 1]
    method: str
    settings: dict[str, Any]  # steps, baselines, examined examples, seconds

    @property
    def method_name(self) -> str:
        return METHOD_NAMES.get(self.method, self.method)


def display_pixels(pixels: np.ndarray, low: float, high: float) -> np.ndarray:
    """Float pixels of the range [low, high] as 8-bit pixels for a picture."""
    scaled = (np.asarray(pixels, np.float32) - low) / (high - low) * 255.0
    return np.clip(np.round(scaled), 0, 255).astype(np.uint8)


def attribution_files(attributions: Attributions) -> dict[str, bytes]:
    """The folder's files by name, in the order to write them (the index last)."""
    buffer = io.BytesIO()
    np.savez_compressed(
        buffer, images=attributions.images, maps=attributions.maps.astype(np.float16)
    )
    index = {
        "method": attributions.method,
        "settings": attributions.settings,
        "chosen": [c.as_json() for c in attributions.chosen],
    }
    return {_MAPS_FILE: buffer.getvalue(), _INDEX_FILE: json.dumps(index, indent=2).encode()}


def write_attributions(folder: str, attributions: Attributions) -> None:
    """Writes `attributions` into `folder` (local or on an object store), the index last."""
    fileio.makedirs(folder)
    for name, data in attribution_files(attributions).items():
        with fileio.open(os.path.join(folder, name), "wb") as handle:
            handle.write(data)


def read_index(folder: str) -> dict[str, Any] | None:
    """What `folder` explains (method, settings, the chosen answers as JSON), without its
    maps; None where the step never finished (or never ran)."""
    index_path = os.path.join(folder, _INDEX_FILE)
    if not fileio.exists(index_path):
        return None
    with fileio.open(index_path) as handle:
        return json.loads(handle.read())


def read_attributions(folder: str) -> Attributions | None:
    """The attributions in `folder`, or None where the step never finished (or never ran)."""
    index = read_index(folder)
    if index is None:
        return None
    with fileio.open(os.path.join(folder, _MAPS_FILE), "rb") as handle:
        arrays = np.load(io.BytesIO(handle.read()))
        images, maps = arrays["images"], arrays["maps"].astype(np.float32)
    fields = {f.name for f in dataclasses.fields(Chosen)}
    chosen = [Chosen(**{k: v for k, v in c.items() if k in fields}) for c in index["chosen"]]
    return Attributions(chosen, images, maps, index["method"], index["settings"])
