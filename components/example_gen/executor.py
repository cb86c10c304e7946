"""The custom ExampleGen executor of every source format, on TFX's BaseExampleGenExecutor.

TFX keeps what it is good at: span and version resolution, input
fingerprints for caching and hash splitting. We add the reading: `formats.py`
turns each input file into checked examples, by the format named in the dataset
section the component carries in its custom config; TFRecords already in the
pipeline's layout are copied as they are. A run that reads several spans
(`dataset.span_window`) reads the older spans of its window beside the newest
one TFX resolved (`spans.py`); each example records its span there, and its source
folder with `dataset.source_folder_slices` (`provenance.py`). Every TFRecord file is
read to its last byte or refused (`tfrecords.py`). And the writing: each split is shuffled
into several gzipped shards (`shards.py`; TFX's writer keeps a class-sorted
source's order in one file on the local runner), written to temporary files
renamed into place when every shard is written; the launcher removes the output
folder when the execution fails.
With `dataset.split_patterns` the input config names one pattern per split
(TFX's own way), and each file goes to its pattern's split; otherwise a source
with predefined train and test splits keeps them, and any other source is
hash-split by the output config (said in one line when every input is a test file).
For an image source, the reading also yields one small fact per image; once all
are read, the images odd among the rest are written to `odd_images.json` beside
the splits and named in one line, or stop the run (`odd_images.py`).
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from typing import Any

import apache_beam as beam
import tensorflow as tf
from google.protobuf import any_pb2, wrappers_pb2

from tpu_pipeline.common.config import DatasetConfig
from tpu_pipeline.common.tfx_api import (
    BaseExampleGenExecutor,
    artifact_utils,
    example_gen_pb2,
    example_gen_utils,
    examples_utils,
    proto_utils,
    standard_component_specs,
    write_split,
)
from tpu_pipeline.components.example_gen.errors import DataFormatError, data_format_error_in
from tpu_pipeline.components.example_gen.examples import ExampleBuilder
from tpu_pipeline.components.example_gen.formats import (
    EVAL,
    TRAIN,
    SourceFormat,
    file_pattern,
    has_predefined_splits,
    imports_unchanged,
    list_inputs,
    read_tfrecord_unchanged,
    source_format,
    split_inputs,
    train_carved_from_test,
)
from tpu_pipeline.components.example_gen.notices import name_files, notify
from tpu_pipeline.components.example_gen.odd_images import (
    ODD_IMAGES_FILE,
    ImageFact,
    find_odd_images,
    image_fact,
    read_odd_images,
)
from tpu_pipeline.components.example_gen.provenance import InputFile, input_file, record_provenance
from tpu_pipeline.components.example_gen.shards import WriteShuffledSplit
from tpu_pipeline.components.example_gen.spans import span_pattern, spans_present, window_spans

# The version of how ExampleGen lays out examples; bump it when a format is stored
# differently (2: IDX and CIFAR-10 pixels as bytes). It is part of the custom config,
# so TFX's cache (which does not see code) never hands a run examples of an older layout.
EXAMPLES_LAYOUT = 2


def dataset_custom_config(dataset: DatasetConfig) -> example_gen_pb2.CustomConfig:
    """Packs the dataset section for the executor (FileBasedExampleGen takes a proto)."""
    packed = any_pb2.Any()
    value = json.dumps({"layout": EXAMPLES_LAYOUT, "dataset": dataset.model_dump(mode="json")})
    packed.Pack(wrappers_pb2.StringValue(value=value))
    return example_gen_pb2.CustomConfig(custom_config=packed)


def _dataset_from(exec_properties: dict[str, Any]) -> DatasetConfig:
    config = example_gen_pb2.CustomConfig()
    proto_utils.json_to_proto(exec_properties[standard_component_specs.CUSTOM_CONFIG_KEY], config)
    value = wrappers_pb2.StringValue()
    config.custom_config.Unpack(value)
    return DatasetConfig.model_validate(json.loads(value.value)["dataset"])


def _split_configs(
    exec_properties: dict[str, Any],
) -> tuple[example_gen_pb2.Input, example_gen_pb2.Output]:
    """The input config (files per split) and output config (hash buckets) TFX passes."""
    input_config = example_gen_pb2.Input()
    proto_utils.json_to_proto(
        exec_properties[standard_component_specs.INPUT_CONFIG_KEY], input_config
    )
    output_config = example_gen_pb2.Output()
    proto_utils.json_to_proto(
        exec_properties[standard_component_specs.OUTPUT_CONFIG_KEY], output_config
    )
    return input_config, output_config


# Serialized examples of float pixels take about this many times their source's bytes
# (4-byte floats from 1-byte or compressed values); encoded images and 8-bit pixels kept as
# bytes about their own bytes.
FLOAT_PIXEL_EXPANSION = 8
_FINGERPRINT_BYTES = re.compile(r"total_bytes:(\d+)")


def _split_percents(output_config: example_gen_pb2.Output) -> str:
    """`80/20`: the train and eval shares of the hash split."""
    buckets = {split.name: split.hash_buckets for split in output_config.split_config.splits}
    total = sum(buckets.values())
    return f"{round(100 * buckets[TRAIN] / total)}/{round(100 * buckets[EVAL] / total)}"


def expected_output_bytes(exec_properties: dict[str, Any], dataset: DatasetConfig) -> int:
    """About how many serialized bytes the examples will take, from TFX's input fingerprint.

    TFX's driver already stats every input file for its fingerprint
    (`split:…,num_files:…,total_bytes:…`), so no second listing of a bucket is needed;
    without one (the executor called directly), 0.
    """
    fingerprint = exec_properties.get(example_gen_utils.FINGERPRINT_PROPERTY_NAME) or ""
    source_bytes = sum(int(found) for found in _FINGERPRINT_BYTES.findall(fingerprint))
    if dataset.stores_encoded_images or dataset.stores_8bit_pixels:
        return source_bytes
    return source_bytes * FLOAT_PIXEL_EXPANSION


def _input_files(
    exec_properties: dict[str, Any], split_pattern: str, dataset: DatasetConfig
) -> list[InputFile]:
    """The files of the split pattern TFX resolved to the newest span; with
    `dataset.mixes_spans`, those of the window's older spans too (`spans.py`)."""
    data_root = exec_properties[standard_component_specs.INPUT_BASE_KEY]
    source = source_format(dataset)
    pattern = file_pattern(dataset)
    if not dataset.mixes_spans:
        return [
            input_file(path, data_root, pattern, dataset)
            for path in list_inputs(os.path.join(data_root, split_pattern), source)
        ]
    newest = _newest_span(exec_properties, data_root, pattern, source)
    return [
        input_file(path, data_root, pattern, dataset, span)
        for span in window_spans(data_root, pattern, newest, dataset.span_window)
        for path in list_inputs(os.path.join(data_root, span_pattern(pattern, span)), source)
    ]


def _newest_span(
    exec_properties: dict[str, Any], data_root: str, pattern: str, source: SourceFormat
) -> int:
    """The span TFX's driver resolved (on Vertex AI the pre-cache-check driver passes it as a
    number); the newest span there is when the executor is run without a driver."""
    resolved = exec_properties.get(example_gen_utils.SPAN_PROPERTY_NAME)
    if resolved is not None:
        return int(resolved)
    present = spans_present(data_root, pattern)
    if not present:
        raise DataFormatError(
            f"{posixpath.join(data_root, pattern)}: no span has a {source.name} input file"
        )
    return present[-1]


def _paths(inputs: list[InputFile]) -> list[str]:
    return [source.path for source in inputs]


# The two outputs of reading: `(split, serialized example)` records, and an image source's
# `ImageFact`s (what finding odd images compares).
RECORDS, IMAGE_FACTS = "records", "image_facts"


class _ReadFile(beam.DoFn):
    """Yields the `(split, serialized example)` records of one input file, and for an image
    source one `ImageFact` per image (tagged IMAGE_FACTS).

    `split` is the split every file read belongs to (`dataset.split_patterns`); None
    lets each record's own split (or none, to be hash-split) stand.
    """

    def __init__(self, dataset_json: str, split: str | None = None):
        self._dataset_json = dataset_json
        self._split = split

    def setup(self):
        dataset = DatasetConfig.model_validate_json(self._dataset_json)
        self._dataset = dataset
        if imports_unchanged(dataset):
            self._read = read_tfrecord_unchanged
        else:
            read, builder = source_format(dataset).read, ExampleBuilder(dataset)
            self._read = lambda path: read(path, builder)

    def process(self, source: InputFile):
        path = source.path
        images = self._dataset.stores_encoded_images
        # An image folder's file is one image; any other file's record is named by number.
        one_file = self._dataset.format == "image_folder"
        for index, (split, example) in enumerate(self._read(path)):
            where = path if one_file else f"{path}: record {index}"
            record_provenance(example, source, where)
            if images:
                fact = image_fact(example, self._dataset, where, self._split or split)
                yield beam.pvalue.TaggedOutput(IMAGE_FACTS, fact)
            # Serialized here: bytes cross Beam's shuffle cheaply, and deterministically, so
            # TFX's hash split puts an example where it put the same Example proto before.
            yield split, example.SerializeToString(deterministic=True)


@beam.ptransform_fn
def _ReadRecords(pipeline, inputs: list[InputFile], dataset: DatasetConfig, split=None):  # noqa: N802
    """Reads the files: the RECORDS and IMAGE_FACTS outputs of `_ReadFile`."""
    return (
        pipeline
        | "ListInputs" >> beam.Create(inputs)
        # One file per element: lets a distributed runner read files in parallel.
        | "SpreadFiles" >> beam.Reshuffle()
        | "ReadFiles"
        >> beam.ParDo(_ReadFile(dataset.model_dump_json(), split)).with_outputs(
            IMAGE_FACTS, main=RECORDS
        )
    )


def _write_odd_images(facts: list[ImageFact], examples_uri: str) -> None:
    found = find_odd_images(facts)
    with tf.io.gfile.GFile(posixpath.join(examples_uri, ODD_IMAGES_FILE), "w") as handle:
        handle.write(found.to_json())


def _say_odd_images(examples_uri: str, dataset: DatasetConfig) -> None:
    """One line naming the odd images; with `source.odd_images: error`, the run's error.

    Raises:
      DataFormatError: odd images and `odd_images: error`; starts with the first one.
    """
    found = read_odd_images(examples_uri)
    if found is None or not found.odd:
        return
    if dataset.source.odd_images == "error":
        raise DataFormatError(
            f"{found.odd[0]}: odd image; {found.line()}; remove or move them "
            "(dataset.source.odd_images: warn reads them as they are)"
        )
    notify(f"{found.line()}; read as they are (dataset.source.odd_images: error stops on them)")


class SourceExampleGenExecutor(BaseExampleGenExecutor):
    """Reads the dataset's format; keeps predefined splits; fails with one clear line."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The IMAGE_FACTS of each read GenerateExamplesByBeam made, for finding odd images.
        self._image_facts: list[beam.PCollection] = []

    def GetInputSourceToExamplePTransform(self) -> beam.PTransform:  # noqa: N802 (TFX API)
        image_facts = self._image_facts

        @beam.ptransform_fn
        def read_examples(pipeline, exec_properties, split_pattern):
            dataset = _dataset_from(exec_properties)
            inputs = _input_files(exec_properties, split_pattern, dataset)
            read = pipeline | "ReadRecords" >> _ReadRecords(inputs, dataset)
            image_facts.append(read[IMAGE_FACTS])
            return read[RECORDS] | "DropSplit" >> beam.Values()

        return read_examples

    def GenerateExamplesByBeam(self, pipeline, exec_properties):  # noqa: N802 (TFX API)
        input_config, output_config = _split_configs(exec_properties)
        input_names = sorted(split.name for split in input_config.splits)
        if input_names == [EVAL, TRAIN]:  # dataset.split_patterns
            dataset = _dataset_from(exec_properties)
            data_root = exec_properties[standard_component_specs.INPUT_BASE_KEY]
            patterns = {split.name: split.pattern for split in input_config.splits}
            inputs = split_inputs(data_root, patterns, source_format(dataset))
            splits = {}
            for name, paths in inputs.items():
                files = [input_file(path, data_root, patterns[name], dataset) for path in paths]
                read = pipeline | f"InputToRecord[{name}]" >> _ReadRecords(files, dataset, name)
                self._image_facts.append(read[IMAGE_FACTS])
                splits[name] = read[RECORDS] | f"DropSplit[{name}]" >> beam.Values()
            return splits
        names = [split.name for split in output_config.split_config.splits]
        if len(input_config.splits) == 1 and sorted(names) == [EVAL, TRAIN]:
            pattern = input_config.splits[0].pattern
            dataset = _dataset_from(exec_properties)
            inputs = _input_files(exec_properties, pattern, dataset)
            source = source_format(dataset)
            if has_predefined_splits(_paths(inputs), source):
                read = pipeline | "InputToRecord" >> _ReadRecords(inputs, dataset)
                self._image_facts.append(read[IMAGE_FACTS])
                parts = read[RECORDS] | "SplitData" >> beam.Partition(
                    lambda record, _: names.index(record[0]), len(names)
                )
                return {
                    name: parts[index] | f"DropSplit[{name}]" >> beam.Values()
                    for index, name in enumerate(names)
                }
            tested = train_carved_from_test(_paths(inputs), source)
            if tested:
                notify(
                    f"every input is a test file ({name_files(tested)}): the train split is "
                    f"carved out of them, {_split_percents(output_config)} by hash "
                    "(dataset.eval_percent); add the train files to keep the test set whole"
                )
        return super().GenerateExamplesByBeam(pipeline, exec_properties)

    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802 (TFX API)
        """Runs ExampleGen; bad input fails with its one-line message, not a Beam trace."""
        try:
            self._generate(output_dict, exec_properties)
        except Exception as error:
            cause = data_format_error_in(error)
            if cause is None:
                raise
            raise DataFormatError(cause) from None

    def _generate(self, output_dict, exec_properties) -> None:
        """TFX's BaseExampleGenExecutor.Do with our writer: shuffled, sharded splits."""
        input_config, output_config = _split_configs(exec_properties)
        outputs = output_dict[standard_component_specs.EXAMPLES_KEY]
        examples = artifact_utils.get_single_instance(outputs)
        examples.split_names = artifact_utils.encode_split_names(
            example_gen_utils.generate_output_split_names(input_config, output_config)
        )
        dataset = _dataset_from(exec_properties)
        expected_bytes = expected_output_bytes(exec_properties, dataset)
        self._image_facts.clear()
        with self._make_beam_pipeline() as pipeline:
            for name, split in self.GenerateExamplesByBeam(pipeline, exec_properties).items():
                split_dir = artifact_utils.get_split_uri(outputs, name)
                _ = split | f"WriteSplit[{name}]" >> WriteShuffledSplit(split_dir, expected_bytes)
            if dataset.stores_encoded_images and self._image_facts:
                _ = (
                    tuple(self._image_facts)
                    | "AllImageFacts" >> beam.Flatten()
                    | "CollectImageFacts" >> beam.combiners.ToList()
                    | "FindOddImages" >> beam.Map(_write_odd_images, examples.uri)
                )
        _say_odd_images(examples.uri, dataset)
        payload_format = exec_properties.get(standard_component_specs.OUTPUT_DATA_FORMAT_KEY)
        file_format = exec_properties.get(
            standard_component_specs.OUTPUT_FILE_FORMAT_KEY, example_gen_pb2.FORMAT_TFRECORDS_GZIP
        )
        if payload_format:
            examples_utils.set_payload_format(examples, payload_format)
        examples_utils.set_file_format(examples, write_split.to_file_format_str(file_format))
