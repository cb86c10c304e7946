"""A run that reads several spans (`dataset.span_window`): which spans, and the span each
example keeps; and the source folder each example keeps (`dataset.source_folder_slices`),
through TFX's own span resolution and the real executor."""

from __future__ import annotations

import pathlib
import shutil

import pytest
import tensorflow as tf
from tfx.components.example_gen import input_processor
from tfx.proto import example_gen_pb2, range_config_pb2
from tfx.types import standard_artifacts
from tfx.types import standard_component_specs as specs
from tfx.utils import proto_utils

from tests.components.example_gen.conftest import read_split, real_photos
from tpu_pipeline.common.config import DatasetConfig, load_config
from tpu_pipeline.components.contract import SOURCE_FOLDER_FEATURE, SPAN_FEATURE
from tpu_pipeline.components.example_gen.errors import DataFormatError
from tpu_pipeline.components.example_gen.executor import (
    SourceExampleGenExecutor,
    dataset_custom_config,
)
from tpu_pipeline.components.example_gen.provenance import source_folder
from tpu_pipeline.components.example_gen.spans import span_pattern, spans_present, window_spans
from tpu_pipeline.pipeline.wiring.graph import example_gen_splits


def write_span(folder: pathlib.Path, span: int, count: int, extra=None) -> None:
    """`count` digits-shaped examples whose pixels all equal the span (so each example says
    which span's file it was read from)."""
    folder.mkdir(parents=True)
    with tf.io.TFRecordWriter(str(folder / "d.tfrecord")) as writer:
        for index in range(count):
            feature = {
                "pixels": tf.train.Feature(float_list=tf.train.FloatList(value=[span] * 64)),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[index % 10])),
                **(extra or {}),
            }
            example = tf.train.Example(features=tf.train.Features(feature=feature))
            writer.write(example.SerializeToString())


def digits_in_spans(tmp_path, window: int, pattern: str = "span-{SPAN}/*.tfrecord"):
    return load_config(
        None,
        {
            "output_dir": str(tmp_path / "out"),
            "dataset.file_pattern": pattern,
            "dataset.span_window": window,
        },
    ).dataset


def run_resolved(dataset, data_root: pathlib.Path, output: pathlib.Path, passed=int):
    """Resolves the span as TFX's driver does (the newest), then runs the executor with the
    span `passed(span)` says (None: no span, as without a driver).

    Returns the examples of both splits together.
    """
    configs = example_gen_splits(dataset)
    input_config = configs["input_config"]
    # The driver's own resolution: the newest span, filled into the input config's patterns.
    processor = input_processor.FileBasedInputProcessor(
        str(data_root), input_config.splits, range_config=None
    )
    span, version = processor.resolve_span_and_version()
    for split in input_config.splits:
        split.pattern = processor.get_pattern_for_span_version(split.pattern, span, version)
    examples = standard_artifacts.Examples()
    examples.uri = str(output)
    exec_properties = {
        specs.INPUT_BASE_KEY: str(data_root),
        specs.INPUT_CONFIG_KEY: proto_utils.proto_to_json(input_config),
        specs.OUTPUT_CONFIG_KEY: proto_utils.proto_to_json(configs["output_config"]),
        specs.CUSTOM_CONFIG_KEY: proto_utils.proto_to_json(dataset_custom_config(dataset)),
        specs.OUTPUT_DATA_FORMAT_KEY: example_gen_pb2.FORMAT_TF_EXAMPLE,
        specs.OUTPUT_FILE_FORMAT_KEY: example_gen_pb2.FORMAT_TFRECORDS_GZIP,
    }
    if passed(span) is not None:
        exec_properties["span"] = passed(span)
    SourceExampleGenExecutor().Do({}, {specs.EXAMPLES_KEY: [examples]}, exec_properties)
    return read_split(output / "Split-train") + read_split(output / "Split-eval")


def spans_of(examples) -> list[tuple[float, list[int]]]:
    """(the pixel value, which is the span written, the span feature) of each example."""
    return [
        (
            example.features.feature["pixels"].float_list.value[0],
            list(example.features.feature[SPAN_FEATURE].int64_list.value),
        )
        for example in examples
    ]


def test_tfx_examplegen_alone_refuses_a_window_of_spans():
    """Why the executor reads the window itself: TFX 1.16 reads one span an execution."""
    split = example_gen_pb2.Input.Split(name="all", pattern="span-{SPAN}/*")
    window = range_config_pb2.RangeConfig(rolling_range=range_config_pb2.RollingRange(num_spans=2))
    with pytest.raises(ValueError, match="single span"):
        input_processor.FileBasedInputProcessor("/tmp", [split], window)


def test_the_spans_present_are_numbers_in_number_order(tmp_path):
    for name in ("span-1", "span-2", "span-10", "span-4", "span-x", "other-3"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "d.tfrecord").write_bytes(b"")
    (tmp_path / "span-7").mkdir()  # a span folder with no file the pattern matches
    assert spans_present(str(tmp_path), "span-{SPAN}/*.tfrecord") == [1, 2, 4, 10]
    assert window_spans(str(tmp_path), "span-{SPAN}/*.tfrecord", 10, 3) == [2, 4, 10]
    # A span's newer neighbours are not read before they are the newest TFX resolved.
    assert window_spans(str(tmp_path), "span-{SPAN}/*.tfrecord", 4, 2) == [2, 4]
    assert window_spans(str(tmp_path), "span-{SPAN}/*.tfrecord", 10, 1) == [10]
    assert window_spans(str(tmp_path), "span-{SPAN}/*.tfrecord", 1, 5) == [1]


def test_a_span_width_is_filled_in_zero_padded(tmp_path):
    for name in ("s001", "s002", "s010"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "a.npz").write_bytes(b"")
    assert spans_present(str(tmp_path), "s{SPAN:3}/*.npz") == [1, 2, 10]
    assert span_pattern("s{SPAN:3}/*.npz", 2) == "s002/*.npz"
    assert span_pattern("span-{SPAN}/*.npz", 12) == "span-12/*.npz"


def test_a_window_of_two_reads_the_two_newest_spans_and_each_example_keeps_its_span(tmp_path):
    data_root = tmp_path / "data"
    for span, count in ((1, 30), (2, 40), (3, 50)):
        write_span(data_root / f"span-{span}", span, count)
    examples = run_resolved(digits_in_spans(tmp_path, 2), data_root, tmp_path / "examples")
    read = spans_of(examples)
    assert len(read) == 40 + 50  # span 1 left out
    assert all(written == kept[0] for written, kept in read), "an example names another span"
    assert sorted({kept[0] for _, kept in read}) == [2, 3]


@pytest.mark.parametrize("passed", [float, lambda span: None], ids=["vertex-number", "none"])
def test_the_window_ends_at_the_newest_span_however_the_span_is_passed(tmp_path, passed):
    data_root = tmp_path / "data"
    for span, count in ((1, 3), (2, 4), (3, 5)):
        write_span(data_root / f"span-{span}", span, count)
    dataset = digits_in_spans(tmp_path, 2)
    examples = run_resolved(dataset, data_root, tmp_path / "examples", passed)
    assert sorted({kept[0] for _, kept in spans_of(examples)}) == [2, 3]


def test_without_a_driver_and_without_spans_the_error_names_the_pattern(tmp_path):
    (tmp_path / "data" / "span-x").mkdir(parents=True)
    (tmp_path / "data" / "span-x" / "d.tfrecord").write_bytes(b"")  # no span number
    with pytest.raises(DataFormatError, match=r"data/span-\{SPAN\}/\*\.tfrecord: no span has"):
        _input_files_of(digits_in_spans(tmp_path, 2), tmp_path / "data")


def _input_files_of(dataset, data_root):
    from tpu_pipeline.components.example_gen.executor import _input_files

    return _input_files({specs.INPUT_BASE_KEY: str(data_root)}, "unused", dataset)


def test_a_window_of_one_reads_the_newest_span_as_tfx_does_and_adds_no_feature(tmp_path):
    data_root = tmp_path / "data"
    for span, count in ((1, 30), (2, 40)):
        write_span(data_root / f"span-{span}", span, count)
    examples = run_resolved(digits_in_spans(tmp_path, 1), data_root, tmp_path / "examples")
    read = spans_of(examples)
    assert len(read) == 40
    assert {written for written, _ in read} == {2.0}
    assert all(kept == [] for _, kept in read)


def test_a_source_feature_named_span_is_refused_not_overwritten(tmp_path):
    data_root = tmp_path / "data"
    own = {SPAN_FEATURE: tf.train.Feature(int64_list=tf.train.Int64List(value=[99]))}
    write_span(data_root / "span-1", 1, 5)
    write_span(data_root / "span-2", 2, 5, extra=own)
    with pytest.raises(DataFormatError, match=r"span-2/d\.tfrecord: record 0: .*named 'span'"):
        run_resolved(digits_in_spans(tmp_path, 2), data_root, tmp_path / "examples")


def test_a_window_with_a_version_in_the_pattern_is_a_config_error(tmp_path):
    with pytest.raises(ValueError, match="VERSION"):
        digits_in_spans(tmp_path, 2, "span-{SPAN}/v{VERSION}/*.tfrecord")
    assert digits_in_spans(tmp_path, 1, "span-{SPAN}/v{VERSION}/*.tfrecord").reads_spans


def test_mixing_spans_needs_a_span_pattern_and_a_window(tmp_path):
    assert digits_in_spans(tmp_path, 2).mixes_spans
    assert not digits_in_spans(tmp_path, 1).mixes_spans
    assert not digits_in_spans(tmp_path, 3, "*.tfrecord").mixes_spans


@pytest.mark.parametrize(
    ("path", "pattern", "form", "folder"),
    [
        ("/d/phone/cat/1.jpg", "*/*/*", "image_folder", "phone"),  # the class folder left out
        ("/d/span-3/phone/cat/1.jpg", "span-{SPAN}/*/*/*", "image_folder", "phone"),
        ("/d/cat/1.jpg", "*/*", "image_folder", "."),
        ("/d/scanner-a/x.tfrecord", "*/*.tfrecord", "tfrecord", "scanner-a"),
        ("/d/span-12/a/b/x.tfrecord", "span-{SPAN}/*/*/*.tfrecord", "tfrecord", "a/b"),
        ("/d/x.tfrecord", "*.tfrecord", "tfrecord", "."),
        ("gs://bucket/d/site-2/x.npz", "*/*.npz", "npz", "site-2"),
    ],
)
def test_the_source_folder_leaves_out_the_span_and_class_folders(path, pattern, form, folder):
    dataset = load_config(
        None, {"dataset.format": form, "dataset.source_folder_slices": True}
    ).dataset
    root = "gs://bucket/d" if path.startswith("gs://") else "/d"
    assert source_folder(path, root, pattern, dataset) == folder


def test_each_example_records_its_source_folder_when_asked(tmp_path):
    data_root = tmp_path / "data"
    write_span(data_root / "scanner-a", 1, 6)
    write_span(data_root / "scanner-b", 2, 4)
    settings = {"dataset.file_pattern": "*/*.tfrecord", "output_dir": str(tmp_path / "out")}
    dataset = load_config(None, {**settings, "dataset.source_folder_slices": True}).dataset
    examples = run_resolved(dataset, data_root, tmp_path / "examples")
    folders = {
        example.features.feature["pixels"].float_list.value[0]: list(
            example.features.feature[SOURCE_FOLDER_FEATURE].bytes_list.value
        )
        for example in examples
    }
    assert folders == {1.0: [b"scanner-a"], 2.0: [b"scanner-b"]}
    assert len(examples) == 10
    plain = load_config(None, settings).dataset  # off by default: nothing added
    unrecorded = run_resolved(plain, data_root, tmp_path / "plain")
    assert all(SOURCE_FOLDER_FEATURE not in e.features.feature for e in unrecorded)


def test_photos_in_camera_folders_record_the_camera_not_the_class(tmp_path):
    photos = real_photos()
    data_root = tmp_path / "data"
    layout = {"phone/0/a.JPG": 0, "phone/1/b.JPG": 1, "dslr/0/c.JPG": 2, "dslr/1/d.JPG": 3}
    for name, photo in layout.items():
        (data_root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(photos[photo], data_root / name)
    dataset = DatasetConfig(
        name="cameras",
        format="image_folder",
        file_pattern="*/*/*.JPG",
        image_shape=(100, 100, 3),
        pixel_feature="image",
        label_feature="label",
        num_classes=2,
        source_folder_slices=True,
    )
    examples = run_resolved(dataset, data_root, tmp_path / "examples")
    recorded = sorted(
        (
            example.features.feature[SOURCE_FOLDER_FEATURE].bytes_list.value[0].decode(),
            example.features.feature["label"].int64_list.value[0],
        )
        for example in examples
    )
    assert recorded == [("dslr", 0), ("dslr", 1), ("phone", 0), ("phone", 1)]
