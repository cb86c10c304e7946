"""Custom ExampleGen executors, one per source format, on TFX's BaseExampleGenExecutor.

TFX keeps what it is good at: span and version resolution, input
fingerprints for caching, hash splitting and writing sharded, gzipped
TFRecords through Beam (to temporary files renamed into place when the
pipeline succeeds; the launcher removes the output folder when it fails).
We add the reading: `formats.py` turns each input file into checked examples.
A source with predefined train and test splits keeps them; any other source
is hash-split by the output config.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import apache_beam as beam
from google.protobuf import any_pb2, wrappers_pb2
from tfx.components.example_gen.base_example_gen_executor import BaseExampleGenExecutor
from tfx.proto import example_gen_pb2
from tfx.types import standard_component_specs
from tfx.utils import proto_utils

from components.example_gen.errors import DataFormatError
from components.example_gen.examples import ExampleBuilder
from components.example_gen.formats import (
    EVAL,
    FORMATS,
    TRAIN,
    has_predefined_splits,
    list_inputs,
)
from pipeline.config import DatasetConfig


def dataset_custom_config(dataset: DatasetConfig) -> example_gen_pb2.CustomConfig:
    """Packs the dataset section for the executor (FileBasedExampleGen takes a proto)."""
    packed = any_pb2.Any()
    packed.Pack(wrappers_pb2.StringValue(value=dataset.model_dump_json()))
    return example_gen_pb2.CustomConfig(custom_config=packed)


def _dataset_from(exec_properties: dict[str, Any]) -> DatasetConfig:
    config = example_gen_pb2.CustomConfig()
    proto_utils.json_to_proto(exec_properties[standard_component_specs.CUSTOM_CONFIG_KEY], config)
    value = wrappers_pb2.StringValue()
    config.custom_config.Unpack(value)
    return DatasetConfig.model_validate_json(value.value)


def _input_files(exec_properties: dict[str, Any], split_pattern: str, format_name: str):
    pattern = os.path.join(exec_properties[standard_component_specs.INPUT_BASE_KEY], split_pattern)
    return list_inputs(pattern, FORMATS[format_name])


class _ReadFile(beam.DoFn):
    """Yields the `(split, example)` records of one input file."""

    def __init__(self, format_name: str, dataset_json: str):
        self._format_name = format_name
        self._dataset_json = dataset_json

    def setup(self):
        self._read = FORMATS[self._format_name].read
        self._builder = ExampleBuilder(DatasetConfig.model_validate_json(self._dataset_json))

    def process(self, path: str):
        yield from self._read(path, self._builder)


@beam.ptransform_fn
def _ReadRecords(pipeline, inputs: list[str], format_name: str, dataset: DatasetConfig):  # noqa: N802
    return (
        pipeline
        | "ListInputs" >> beam.Create(inputs)
        # One file per element: lets a distributed runner read files in parallel.
        | "SpreadFiles" >> beam.Reshuffle()
        | "ReadFiles" >> beam.ParDo(_ReadFile(format_name, dataset.model_dump_json()))
    )


@beam.ptransform_fn
def _ReadExamples(pipeline, exec_properties, split_pattern, format_name):  # noqa: N802
    inputs = _input_files(exec_properties, split_pattern, format_name)
    dataset = _dataset_from(exec_properties)
    return (
        pipeline
        | "ReadRecords" >> _ReadRecords(inputs, format_name, dataset)
        | "DropSplit" >> beam.Values()
    )


class SourceExampleGenExecutor(BaseExampleGenExecutor):
    """Reads the `FORMAT` of a subclass; keeps predefined splits; fails with one clear line."""

    FORMAT = ""

    def GetInputSourceToExamplePTransform(self) -> beam.PTransform:  # noqa: N802 (TFX API)
        return functools.partial(_ReadExamples, format_name=self.FORMAT)

    def GenerateExamplesByBeam(self, pipeline, exec_properties):  # noqa: N802 (TFX API)
        input_config = example_gen_pb2.Input()
        proto_utils.json_to_proto(
            exec_properties[standard_component_specs.INPUT_CONFIG_KEY], input_config
        )
        output_config = example_gen_pb2.Output()
        proto_utils.json_to_proto(
            exec_properties[standard_component_specs.OUTPUT_CONFIG_KEY], output_config
        )
        names = [split.name for split in output_config.split_config.splits]
        if len(input_config.splits) == 1 and sorted(names) == [EVAL, TRAIN]:
            pattern = input_config.splits[0].pattern
            inputs = _input_files(exec_properties, pattern, self.FORMAT)
            if has_predefined_splits(inputs, FORMATS[self.FORMAT]):
                records = pipeline | "InputToRecord" >> _ReadRecords(
                    inputs, self.FORMAT, _dataset_from(exec_properties)
                )
                parts = records | "SplitData" >> beam.Partition(
                    lambda record, _: names.index(record[0]), len(names)
                )
                return {
                    name: parts[index] | f"DropSplit[{name}]" >> beam.Values()
                    for index, name in enumerate(names)
                }
        return super().GenerateExamplesByBeam(pipeline, exec_properties)

    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802 (TFX API)
        """Runs TFX's ExampleGen; bad input fails with its one-line message, not a Beam trace."""
        try:
            super().Do(input_dict, output_dict, exec_properties)
        except Exception as error:
            cause = _data_format_error(error)
            if cause is None:
                raise
            raise DataFormatError(cause) from None


def _data_format_error(error: BaseException) -> str | None:
    """The first line of a DataFormatError, however Beam re-raised or wrapped it."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, DataFormatError):
            return str(seen).splitlines()[0].split(" [while running")[0]
        seen = seen.__cause__ or seen.__context__
    return None


# One named class per format, not classes made in a loop: TFX records the executor by
# its import path, and the Vertex AI container must import the same class by that path.
class TFRecordExampleGenExecutor(SourceExampleGenExecutor):
    """TFRecords of tf.train.Example: float pixels or PNG/JPEG bytes."""

    FORMAT = "tfrecord"


class NpzExampleGenExecutor(SourceExampleGenExecutor):
    """Keras-layout .npz archives (x_train, y_train, x_test, y_test)."""

    FORMAT = "npz"


class IdxExampleGenExecutor(SourceExampleGenExecutor):
    """The original MNIST IDX files, gzipped or not."""

    FORMAT = "idx"


class Cifar10BinaryExampleGenExecutor(SourceExampleGenExecutor):
    """The CIFAR-10 binary version."""

    FORMAT = "cifar10_binary"


class ImageFolderExampleGenExecutor(SourceExampleGenExecutor):
    """PNG/JPEG images, one sub-folder per class."""

    FORMAT = "image_folder"


class CsvExampleGenExecutor(SourceExampleGenExecutor):
    """CSV files of a label column and pixel columns."""

    FORMAT = "csv"


EXECUTORS: dict[str, type[SourceExampleGenExecutor]] = {
    executor.FORMAT: executor
    for executor in (
        TFRecordExampleGenExecutor,
        NpzExampleGenExecutor,
        IdxExampleGenExecutor,
        Cifar10BinaryExampleGenExecutor,
        ImageFolderExampleGenExecutor,
        CsvExampleGenExecutor,
    )
}
