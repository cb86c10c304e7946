"""Builds the ExampleGen component for a dataset's format.

One FileBasedExampleGen with our executor serves every format: TFRecords
already in the pipeline's layout (float pixels and an int label under the
configured names, no source options) are copied unchanged, every other source
is converted and checked record by record. Either way each input file is read
whole or refused with the file and byte named. TFX's ImportExampleGen does not
promise that: it takes a gzip stream cut after a record for a whole file, and
refuses a cut record header with a bare ValueError that names no file.
It keeps the input and output configs that pipeline.py builds, so spans and
splits behave the same for every format.
"""

from __future__ import annotations

from tpu_pipeline.common.config import DatasetConfig
from tpu_pipeline.common.tfx_api import (
    BaseComponent,
    FileBasedExampleGen,
    example_gen_pb2,
    executor_spec,
)
from tpu_pipeline.components.example_gen.executor import (
    SourceExampleGenExecutor,
    dataset_custom_config,
)


def build_example_gen(
    dataset: DatasetConfig,
    data_root: str,
    *,
    input_config: example_gen_pb2.Input,
    output_config: example_gen_pb2.Output,
) -> BaseComponent:
    """Returns the ExampleGen that turns `dataset`'s raw files into examples.

    Args:
      dataset: the dataset section: format, source options, shapes and names.
      data_root: the folder the input config's patterns are relative to.
      input_config: which files (and spans) to read.
      output_config: the output splits (hash buckets); a source with its own
        train and test splits keeps those instead.
    """
    return FileBasedExampleGen(
        input_base=data_root,
        input_config=input_config,
        output_config=output_config,
        custom_config=dataset_custom_config(dataset),
        custom_executor_spec=executor_spec.BeamExecutorSpec(SourceExampleGenExecutor),
    )
