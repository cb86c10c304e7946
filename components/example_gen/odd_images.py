"""Images that decode but are odd among the rest: tiny, of a format unlike the rest, or the
same bytes under two classes or in both splits (a "not found" placeholder, a copy).

ExampleGen reads every image the same; nothing about one file says it is odd,
only the whole dataset does. So the reader emits one small `ImageFact` per image
beside its example, and once all are read `find_odd_images` compares them:

- tiny: the shorter side is under `TINY_SIDE` pixels (an icon or a 1x1 tracking
  pixel, whatever the rest are), or under 1/`TINY_FRACTION` of the median
  shorter side of all images (a 100-pixel thumbnail among 2,000-pixel photos).
  Relative, so a dataset of small images (28x28 digits) is not tiny; absolute
  too, so a folder of placeholders is not its own median.
- unlike the rest: its format (jpeg, png, gif, bmp) is at most 1/`MINORITY_RATIO`
  as common as the most common format (1 GIF among 400 JPEGs; a folder half PNG,
  half JPEG is two formats, not odd).
- duplicate: the exact stored bytes (a content hash) appear under two classes or
  in both predefined splits. A copy within one class and split is only a
  copy; with a hash split, identical examples always land in the same split.

ExampleGen writes what was found (`OddImages`) beside the splits, says it in one
line, and stops on it with `dataset.source.odd_images: error`. The facts are held in
memory once, about 270 bytes an image (measured with tracemalloc for 60-character
paths): ~0.3 GB for a million photos.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import posixpath
import statistics

import tensorflow as tf

from tpu_pipeline.common.config import DatasetConfig
from tpu_pipeline.components.contract import (
    IMAGE_FORMAT_FEATURE,
    IMAGE_HEIGHT_FEATURE,
    IMAGE_WIDTH_FEATURE,
)
from tpu_pipeline.components.example_gen.notices import name_files

TINY_SIDE = 16
TINY_FRACTION = 4
MINORITY_RATIO = 10
# Beside the Split-* folders of ExampleGen's output.
ODD_IMAGES_FILE = "odd_images.json"
KINDS = ("tiny", "format", "duplicate")
_KIND_WORDS = {
    "tiny": "tiny",
    "format": "of a format unlike the rest",
    "duplicate": "the same bytes under another class or split",
}


@dataclasses.dataclass(frozen=True, slots=True)
class ImageFact:
    """What comparing one image with the rest needs: where it is, its class, split and size."""

    where: str
    label: int | None
    split: str | None  # the predefined split; None where ExampleGen hash-splits
    format: str
    height: int
    width: int
    digest: bytes  # SHA-256 of the stored bytes


def image_fact(
    example: tf.train.Example, dataset: DatasetConfig, where: str, split: str | None
) -> ImageFact:
    """The fact of one image example ExampleGen built (`ExampleBuilder.build_image`)."""
    features = example.features.feature

    def one(name: str, kind: str):
        values = getattr(features[name], kind).value
        return values[0] if values else None

    return ImageFact(
        where=where,
        label=one(dataset.label_feature, "int64_list"),
        split=split,
        format=one(IMAGE_FORMAT_FEATURE, "bytes_list").decode(),
        height=one(IMAGE_HEIGHT_FEATURE, "int64_list"),
        width=one(IMAGE_WIDTH_FEATURE, "int64_list"),
        digest=hashlib.sha256(one(dataset.pixel_feature, "bytes_list")).digest(),
    )


@dataclasses.dataclass
class OddImages:
    """The odd images of a dataset, by kind (each list names files in read order)."""

    images: int
    found: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    # What the images were compared with, for the line: median shorter side, usual format.
    median_side: int = 0
    usual_format: str = ""

    @property
    def odd(self) -> list[str]:
        """Every odd image once, in the order of `KINDS`."""
        return list(dict.fromkeys(where for kind in KINDS for where in self.found.get(kind, [])))

    def line(self) -> str:
        """One line: how many are odd, then each kind with its first files and count."""
        parts = []
        for kind in KINDS:
            wheres = self.found.get(kind, [])
            if wheres:
                parts.append(f"{len(wheres)} {_KIND_WORDS[kind]} ({name_files(wheres)})")
        context = f"median side {self.median_side} px, most are {self.usual_format}"
        return f"{len(self.odd)} of {self.images} images are odd ({context}): " + "; ".join(parts)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> OddImages:
        return cls(**json.loads(text))


def find_odd_images(facts: list[ImageFact]) -> OddImages:
    """Compares every image with the rest (the module docstring says how)."""
    facts = sorted(facts, key=lambda fact: fact.where)
    if not facts:
        return OddImages(0)
    median_side = statistics.median_low(min(f.height, f.width) for f in facts)
    formats = collections.Counter(f.format for f in facts)
    usual_format, usual_count = formats.most_common(1)[0]
    tiny_below = max(TINY_SIDE, median_side / TINY_FRACTION)
    by_digest = collections.defaultdict(list)
    for fact in facts:
        by_digest[fact.digest].append(fact)
    shared = {
        digest
        for digest, copies in by_digest.items()
        if len({f.label for f in copies}) > 1 or len({f.split for f in copies} - {None}) > 1
    }
    found = {
        "tiny": [f.where for f in facts if min(f.height, f.width) < tiny_below],
        "format": [f.where for f in facts if formats[f.format] * MINORITY_RATIO <= usual_count],
        "duplicate": [f.where for f in facts if f.digest in shared],
    }
    return OddImages(
        images=len(facts),
        found={kind: wheres for kind, wheres in found.items() if wheres},
        median_side=int(median_side),
        usual_format=usual_format,
    )


def read_odd_images(examples_uri: str) -> OddImages | None:
    """What ExampleGen found odd among an image source's images (its Examples artifact's
    folder); None for other sources, and for examples written before it looked."""
    path = posixpath.join(examples_uri, ODD_IMAGES_FILE)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as handle:
        return OddImages.from_json(handle.read())
