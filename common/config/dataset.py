"""The `dataset:` section: where the raw examples are, how to read them, and the built-ins."""

from __future__ import annotations

import pathlib
from typing import Any, Literal

from pydantic import Field, model_validator

from tpu_pipeline.common.config.base import _Section

# Data the built-in datasets ship with (package data; see common/data/*/README.md).
BUILTIN_DATA_DIR = pathlib.Path(__file__).resolve().parents[1] / "data"


# Formats whose pixels are unsigned bytes by their definition (`stores_8bit_pixels`).
_EIGHT_BIT_FORMATS = ("idx", "cifar10_binary")


class SourceConfig(_Section):
    """How to read raw files that are not yet in the pipeline's layout.

    One example per format is in docs/data-formats.md.
    """

    pixel_feature: str | None = Field(
        default=None, description="TFRecord feature of the pixels; default: dataset.pixel_feature"
    )
    pixel_encoding: Literal["float", "image"] = Field(
        default="float",
        description="float pixel list, or PNG/JPEG bytes (checked and kept encoded by ExampleGen)",
    )
    label_feature: str | None = Field(
        default=None, description="TFRecord feature or CSV column; default: dataset.label_feature"
    )
    label_names: tuple[str, ...] | None = Field(
        default=None,
        description="class names in label order: read from string labels and image folders, "
        "shown wherever classes are (report, summary, TensorBoard)",
    )
    id_feature: str | None = Field(
        default=None, description="TFRecord feature copied unchanged into the examples"
    )
    resize: bool = Field(
        default=False, description="resize images to image_shape; off, other sizes are errors"
    )
    max_image_side: int | None = Field(
        default=None,
        ge=1,
        description="image sources: shrink images whose longer side exceeds this many pixels "
        "once, in ExampleGen (aspect kept; re-encoded as JPEG quality 95 or PNG); "
        "null keeps every image's bytes unchanged",
    )
    odd_images: Literal["warn", "error"] = Field(
        default="warn",
        description="image sources: images that are tiny, of a format unlike the rest, or the "
        "same bytes under two classes or splits are named in one line (warn) or stop the "
        "run (error, exit code 3); see components/example_gen/odd_images.py",
    )
    image_value_range: tuple[float, float] = Field(
        default=(0.0, 255.0),
        description="pixel data only: the values that 0 and 255 of an encoded image sent to "
        "the `images` serving signature become (photos stored encoded go to the model as 0..1)",
    )

    @model_validator(mode="after")
    def _increasing_value_range(self) -> SourceConfig:
        low, high = self.image_value_range
        if not low < high:
            raise ValueError(
                f"image_value_range must be (low, high) with low < high, got {low, high}"
            )
        return self


class SplitPatterns(_Section):
    """The files of the training split and of the eval split, for layouts whose folder names do
    not say which is which (folders named train, test, eval, val or validation already do).

    Whole files go to a split, for every format: a file's own test part (an .npz's
    `x_test`) follows its pattern's split too.
    """

    train: str = Field(min_length=1, description="training files, relative to data_dir")
    eval: str = Field(min_length=1, description="eval files, relative to data_dir")

    @model_validator(mode="after")
    def _two_fixed_patterns(self) -> SplitPatterns:
        if self.train == self.eval:
            raise ValueError(
                f"train and eval are the same pattern {self.train!r}; a file belongs to one split"
            )
        if "{SPAN}" in self.train + self.eval:
            raise ValueError(
                "{SPAN} is not supported here; for spans use file_pattern with train and eval "
                "folders inside each span, e.g. 'span-{SPAN}/*/*.tfrecord*'"
            )
        return self


class DatasetConfig(_Section):
    """Where the raw examples are and how to read them.

    By default the data is a folder of TFRecord files of `tf.train.Example`,
    each holding a flat float list of pixels (row-major, channels last) and an
    int64 label. ExampleGen converts every other `format` into that layout,
    except image sources, whose encoded bytes it keeps (`stores_encoded_images`),
    and 8-bit pixel sources, whose pixel bytes it keeps (`stores_8bit_pixels`).
    """

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    data_dir: str | None = Field(
        default=None, description="Folder of TFRecord files; built-in datasets fill it in."
    )
    file_pattern: str | None = Field(
        default=None, description="files under data_dir to read; default: the format's own"
    )
    split_patterns: SplitPatterns | None = Field(
        default=None,
        description="the files of each split, instead of file_pattern; unset: folder names "
        "or the format's own splits, else a hash split by eval_percent",
    )
    image_shape: tuple[int, int, int] = Field(description="height, width, channels")
    pixel_feature: str
    label_feature: str
    num_classes: int = Field(ge=2)
    schema_file: str | None = Field(
        default=None, description="Curated schema; defaults to schemas/<name>/schema.pbtxt."
    )
    eval_percent: int = Field(default=20, ge=1, le=50)
    span_window: int = Field(
        default=1, ge=1, description="with {SPAN} in file_pattern: latest spans each run reads"
    )
    source_folder_slices: bool = Field(
        default=False,
        description="ExampleGen records each example's source folder (below data_dir, without "
        "the span and class folders; e.g. the camera in phone/cat/1.jpg) and the Evaluator "
        "slices by it; the schema needs a source_folder feature",
    )
    label_drift_threshold: float | None = Field(
        default=0.1,
        gt=0,
        le=1,
        description="with {SPAN} in file_pattern: largest L-infinity distance allowed between "
        "this span's label distribution and the previous span's; null: no check",
    )
    format: str = Field(
        default="tfrecord",
        pattern=r"^[a-z0-9_]+$",
        description="a reader of components/example_gen/formats.py",
    )
    source: SourceConfig = SourceConfig()

    @model_validator(mode="after")
    def _positive_shape(self) -> DatasetConfig:
        if any(dim < 1 for dim in self.image_shape):
            raise ValueError(f"image_shape must be positive, got {self.image_shape}")
        names = self.source.label_names
        if names is not None and len(names) != self.num_classes:
            raise ValueError(
                f"source.label_names has {len(names)} names but num_classes is {self.num_classes}"
            )
        if self.split_patterns is not None and self.file_pattern is not None:
            raise ValueError(
                "split_patterns names the files of both splits: leave out file_pattern "
                f"(it is {self.file_pattern!r})"
            )
        if self.mixes_spans and "{VERSION" in (self.file_pattern or ""):
            raise ValueError(
                f"span_window {self.span_window} with {{VERSION}} in file_pattern: which version "
                "of an older span to read is not defined; drop {VERSION} or read one span"
            )
        return self

    @property
    def stores_encoded_images(self) -> bool:
        """Whether ExampleGen keeps each image's encoded (PNG/JPEG) bytes in `pixel_feature`.

        True for image sources (image folders, TFRecords with `source.pixel_encoding:
        image`): their examples hold one bytes value per image. False for pixel sources
        (npz, IDX, CSV, CIFAR-10 binary, float TFRecords).
        """
        return self.format == "image_folder" or (
            self.format == "tfrecord" and self.source.pixel_encoding == "image"
        )

    @property
    def stores_8bit_pixels(self) -> bool:
        """Whether ExampleGen stores the pixels as one bytes value of `pixel_count` uint8s.

        True for the formats whose pixels are unsigned bytes by definition (IDX, CIFAR-10
        binary): a quarter of the floats' size, and the same floats once decoded
        (`tf.io.decode_raw`). Still pixel data, not photos: its own recipe and scaling.
        Other pixel sources (npz, CSV, float TFRecords) may hold any number and keep
        `pixel_count` floats.
        """
        return self.format in _EIGHT_BIT_FORMATS

    @model_validator(mode="after")
    def _shrink_only_images(self) -> DatasetConfig:
        side = self.source.max_image_side
        if side is not None and not self.stores_encoded_images:
            raise ValueError(
                "source.max_image_side shrinks encoded images: it needs format image_folder, "
                "or format tfrecord with source.pixel_encoding: image"
            )
        if side is not None and side < max(self.image_shape[:2]):
            raise ValueError(
                f"source.max_image_side ({side}) is below the image_shape's longer side "
                f"({max(self.image_shape[:2])}): training would upscale what ingest shrank"
            )
        return self

    @property
    def reads_spans(self) -> bool:
        """Whether the data comes in spans (`{SPAN}` in `file_pattern`).

        No format's default pattern has one, and `split_patterns` refuses it.
        """
        return "{SPAN}" in (self.file_pattern or "")

    @property
    def mixes_spans(self) -> bool:
        """Whether a run reads several spans (`span_window` > 1), so that every example
        records the span it came from (the `span` feature the Evaluator slices by)."""
        return self.reads_spans and self.span_window > 1

    @property
    def pixel_count(self) -> int:
        height, width, channels = self.image_shape
        return height * width * channels

    @property
    def class_names(self) -> tuple[str, ...]:
        """Each class's name in label order: `source.label_names`, else the label values."""
        return self.source.label_names or tuple(str(i) for i in range(self.num_classes))

    @property
    def resolved_schema_file(self) -> pathlib.Path:
        if self.schema_file:
            return pathlib.Path(self.schema_file)
        from tpu_pipeline.schemas import schema_path

        return schema_path(self.name)


BUILTIN_DATASETS: dict[str, dict[str, Any]] = {
    # scikit-learn's 1,797 8x8 digits: written to TFRecord on first use.
    "digits": dict(
        name="digits",
        image_shape=(8, 8, 1),
        pixel_feature="pixels",
        label_feature="label",
        num_classes=10,
        # Pixels are 0-16: a PNG's 0-255 map onto that range when served as images.
        source=dict(image_value_range=(0.0, 16.0)),
    ),
    # 1,000 real MNIST digits from the TFX repository, pixels scaled to [-0.5, 0.5].
    "mnist": dict(
        name="mnist",
        data_dir=str(BUILTIN_DATA_DIR / "mnist"),
        file_pattern="mnist.tfrecord.gz",
        image_shape=(28, 28, 1),
        pixel_feature="image_floats",
        label_feature="image_class",
        num_classes=10,
        source=dict(image_value_range=(-0.5, 0.5)),
    ),
    # 301 real photos of hands showing digits (Apache-2.0; see its README.md), stored encoded.
    "signs": dict(
        name="signs",
        data_dir=str(BUILTIN_DATA_DIR / "sign-language-digits"),
        format="image_folder",
        split_patterns=dict(train="train/*/*.JPG", eval="validation/*/*.JPG"),
        image_shape=(64, 64, 3),
        pixel_feature="image",
        label_feature="label",
        num_classes=10,
        # One stray 3024x3024 phone photo among the 100x100 ones.
        source=dict(resize=True, max_image_side=512),
    ),
}

DEFAULT_DATASET = "digits"
