"""The job's first step: every record of a file, checked as ExampleGen checks it, in chunks.

Records reach the model as ExampleGen writes them (`ExampleBuilder`), serialized,
so the predictions are what a model server answers for the same records.
TFRecords already in the pipeline's layout are checked a chunk at a time and go
on as they are (`read_tfrecord_batches`). Beam moves chunks, never single
records: per record, a Beam step costs more than a small model's prediction.
Photos for a model trained on pixel data are read as photos and decoded into the
model's pixels (`PhotoPixels`, `folder_dataset.py`).
"""

from __future__ import annotations

import dataclasses

import apache_beam as beam
import numpy as np
import tensorflow as tf

from tpu_pipeline.common.config import DatasetConfig
from tpu_pipeline.components.example_gen.errors import DataFormatError, op_error_reason
from tpu_pipeline.components.example_gen.examples import ExampleBuilder
from tpu_pipeline.components.example_gen.formats import (
    imports_unchanged,
    read_tfrecord_batches,
    source_format,
)
from tpu_pipeline.components.images.decode import decode_encoded_image

# Records read and checked at once, at least: a batch check of layout-ready TFRecords
# costs 1.9 µs a record in 1,024s against 3.4 µs in 256s (digits); the model still
# gets batches of `batch_size`.
READ_CHUNK = 1024


@dataclasses.dataclass(frozen=True)
class Records:
    """Consecutive records of one file, checked: `path:index`, serialized example, label."""

    sources: list[str]
    examples: list[bytes]
    labels: list[int | None]

    def __len__(self) -> int:
        return len(self.sources)


class PhotoPixels:
    """A checked photo's example -> the example of its pixels a pixel-data model reads.

    Decoded, converted to the model's channels, resized to its image shape and scaled to
    its `source.image_value_range` by the ops of its own `images` signature.
    """

    def __init__(self, photos: DatasetConfig, model: DatasetConfig):
        self._feature = photos.pixel_feature
        self._decoding = model.model_copy(
            update={"source": model.source.model_copy(update={"resize": True})}
        )
        self._builder = ExampleBuilder(model, labels_required=False)

    def __call__(self, example: tf.train.Example, label: int | None, where: str):
        encoded = example.features.feature[self._feature].bytes_list.value[0]
        try:
            pixels = decode_encoded_image(tf.constant(encoded), self._decoding).numpy()
        except tf.errors.OpError as error:
            raise DataFormatError(f"{where}: {op_error_reason(error)}") from None
        if self._decoding.stores_8bit_pixels:
            pixels = pixels.astype(np.uint8)
        return self._builder.build(pixels, label, where)


class ReadRecords(beam.DoFn):
    """Yields every record of one file, checked as ExampleGen checks it, in `Records` of
    at most `chunk_size`; read as `read_as` when given (photos for a pixel model)."""

    def __init__(
        self, dataset: DatasetConfig, chunk_size: int, read_as: DatasetConfig | None = None
    ):
        self._dataset_json = dataset.model_dump_json()
        self._read_as_json = read_as.model_dump_json() if read_as is not None else None
        self._chunk_size = chunk_size

    def setup(self):
        dataset = DatasetConfig.model_validate_json(self._dataset_json)
        read_as = dataset
        self._convert = None
        if self._read_as_json is not None:
            read_as = DatasetConfig.model_validate_json(self._read_as_json)
            self._convert = PhotoPixels(read_as, dataset)
        self._builder = ExampleBuilder(read_as, labels_required=False)
        self._read = source_format(read_as).read
        self._in_batches = imports_unchanged(read_as)

    def process(self, path: str):
        if self._in_batches:
            start = 0
            for examples, labels in read_tfrecord_batches(path, self._builder, self._chunk_size):
                sources = [f"{path}:{index}" for index in range(start, start + len(examples))]
                yield Records(sources, examples, labels)
                start += len(examples)
            return
        chunk = Records([], [], [])
        for index, (_, example) in enumerate(self._read(path, self._builder)):
            label = self._builder.label_of(example)
            if self._convert is not None:
                example = self._convert(example, label, f"{path}:{index}")
            chunk.sources.append(f"{path}:{index}")
            chunk.examples.append(example.SerializeToString())
            chunk.labels.append(label)
            if len(chunk) == self._chunk_size:
                yield chunk
                chunk = Records([], [], [])
        if len(chunk):
            yield chunk
