"""Picks the ExampleGen component for a dataset's format.

TFRecords already in the pipeline's layout (float pixels and an int label
under the configured names, no source options) go through TFX's own
ImportExampleGen, which copies records unchanged: today's behaviour and the
fastest path. Every other source runs the validating executor, which reads
the dataset's format, in a FileBasedExampleGen. Both keep the input and output configs that
pipeline.py builds, so spans and splits behave the same for every format.
"""

from __future__ import annotations

from common.config import DatasetConfig, SourceConfig
from common.tfx_api import (
    BaseComponent,
    FileBasedExampleGen,
    ImportExampleGen,
    example_gen_pb2,
    executor_spec,
    range_config_pb2,
)
from components.example_gen.executor import SourceExampleGenExecutor, dataset_custom_config


def imports_unchanged(dataset: DatasetConfig) -> bool:
    """Whether the records need no conversion, so ImportExampleGen can copy them as they are."""
    return dataset.format == "tfrecord" and dataset.source == SourceConfig()


def build_example_gen(
    dataset: DatasetConfig,
    data_root: str,
    *,
    input_config: example_gen_pb2.Input,
    output_config: example_gen_pb2.Output,
    range_config: range_config_pb2.RangeConfig | None = None,
) -> BaseComponent:
    """Returns the ExampleGen that turns `dataset`'s raw files into examples.

    Args:
      dataset: the dataset section: format, source options, shapes and names.
      data_root: the folder the input config's patterns are relative to.
      input_config: which files (and spans) to read.
      output_config: the output splits (hash buckets); a source with its own
        train and test splits keeps those instead.
      range_config: which spans to read; None reads the latest.
    """
    if imports_unchanged(dataset):
        return ImportExampleGen(
            input_base=data_root,
            input_config=input_config,
            output_config=output_config,
            range_config=range_config,
        )
    return FileBasedExampleGen(
        input_base=data_root,
        input_config=input_config,
        output_config=output_config,
        range_config=range_config,
        custom_config=dataset_custom_config(dataset),
        custom_executor_spec=executor_spec.BeamExecutorSpec(SourceExampleGenExecutor),
    )
