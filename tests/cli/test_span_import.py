"""Importing spans (of a folder given alone too: recognised as `run` recognises it), and the
ExampleGen each dataset gets inside the pipeline."""

from __future__ import annotations

import io

import pytest
from tfx.components import FileBasedExampleGen
from tfx.proto import example_gen_pb2
from tfx.utils import proto_utils

from tests.cli.digit_photos import write_digit_photos
from tests.components.example_gen.conftest import make_dataset
from tpu_pipeline.cli.main import EXIT_DATA_REJECTED, main
from tpu_pipeline.cli.span_import import import_span
from tpu_pipeline.cli.synthetic_data import write_synthetic
from tpu_pipeline.common.config import ConfigError
from tpu_pipeline.components.example_gen.executor import SourceExampleGenExecutor
from tpu_pipeline.components.example_gen.factory import build_example_gen
from tpu_pipeline.pipeline.local import progress


def test_imports_become_numbered_spans_and_never_replace_one(tmp_path):
    dataset = make_dataset("npz", data_dir=str(tmp_path / "data"), file_pattern="span-{SPAN}/*.npz")
    write_synthetic(tmp_path / "week1", "npz", 6, "mnist", 2, seed=1)
    write_synthetic(tmp_path / "week2", "npz", 8, "mnist", 2, seed=2)

    first, first_count = import_span(dataset, tmp_path / "week1")
    second, second_count = import_span(dataset, tmp_path / "week2" / "data.npz")

    assert (first.name, first_count, second.name, second_count) == ("span-1", 6, "span-2", 8)
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["span-1", "span-2"]
    with pytest.raises(FileExistsError):
        import_span(dataset, tmp_path / "week2", span=1)
    week1 = (tmp_path / "week1" / "data.npz").read_bytes()
    assert (first / "data.npz").read_bytes() == week1


def test_import_needs_a_span_folder_in_the_pattern(tmp_path):
    dataset = make_dataset("npz", data_dir=str(tmp_path / "data"))
    with pytest.raises(ConfigError, match=r"span-\{SPAN\}/\*\.npz"):
        import_span(dataset, tmp_path)


def _configs(pattern):
    input_config = example_gen_pb2.Input(
        splits=[example_gen_pb2.Input.Split(name="all", pattern=pattern)]
    )
    return input_config, example_gen_pb2.Output()


@pytest.mark.parametrize("data_format, pattern", [("tfrecord", "*.tfrecord*"), ("npz", "*.npz")])
def test_every_format_gets_our_executor_and_keeps_the_span_pattern(data_format, pattern):
    # Layout-ready TFRecords too: only our executor proves each file was read whole.
    input_config, output_config = _configs(f"span-{{SPAN}}/{pattern}")
    component = build_example_gen(
        make_dataset(data_format), "/data", input_config=input_config, output_config=output_config
    )
    assert isinstance(component, FileBasedExampleGen)
    assert component.executor_spec.executor_class is SourceExampleGenExecutor
    kept = proto_utils.json_to_proto(
        component.exec_properties["input_config"], example_gen_pb2.Input()
    )
    assert kept == input_config


def test_import_shows_its_progress_over_files_and_records(tmp_path, monkeypatch):
    dataset = make_dataset("npz", data_dir=str(tmp_path / "data"), file_pattern="span-{SPAN}/*.npz")
    source = tmp_path / "source"
    source.mkdir()
    for name, seed in (("a", 1), ("b", 2)):
        folder = write_synthetic(tmp_path / name, "npz", 1200, "mnist", 200, seed=seed)
        (folder / "data.npz").rename(source / f"{name}.npz")
    monkeypatch.setattr(progress, "PLAIN_UPDATE_SECONDS", 0.0)  # every update, as a line
    shown = io.StringIO()
    _, count = import_span(dataset, source, progress=shown)
    assert count == 2400
    lines = shown.getvalue().splitlines()
    assert lines[0] == f"checking {source}/*.npz"
    assert any(line.startswith("checking file 2/2: 2,000 records read (") for line in lines)


def test_data_import_of_a_photo_folder_alone_recognises_it_and_imports_its_layout(tmp_path, capfd):
    photos = write_digit_photos(tmp_path / "week 1", per_class=2)
    data = tmp_path / "data"

    code = main(["data", "import", "--source", str(photos), "--data-dir", str(data)])

    out, err = capfd.readouterr()
    assert code == 0, err
    assert err.splitlines()[0].startswith(
        f"tpu-pipeline: recognised {photos}: class folders: 20 photos of 10 classes"
    )
    assert f"imported 20 examples into {data / 'span-1'}" in out
    imported = sorted(p.relative_to(data / "span-1") for p in (data / "span-1").rglob("*.png"))
    assert imported == sorted(p.relative_to(photos) for p in photos.rglob("*.png"))
    assert "--set dataset.file_pattern='span-{SPAN}/*/*' (format image_folder)" in err


def test_data_import_of_npz_files_alone_takes_the_format_from_their_content(tmp_path, capfd):
    write_synthetic(tmp_path / "week1", "npz", 12, "mnist", 2, seed=1)
    data = tmp_path / "data"

    code = main(["data", "import", "--source", str(tmp_path / "week1"), "--data-dir", str(data)])

    out, err = capfd.readouterr()
    assert code == 0, err
    assert err.splitlines()[0].startswith(f"tpu-pipeline: recognised {tmp_path / 'week1'}: .npz")
    assert f"imported 12 examples into {data / 'span-1'}" in out
    assert (data / "span-1" / "data.npz").exists()
    assert "dataset.file_pattern='span-{SPAN}/*.npz' (format npz)" in err


def test_data_import_of_an_odd_folder_stops_in_one_line_with_exit_3(tmp_path, capfd):
    photos = write_digit_photos(tmp_path / "photos", per_class=6, classes={"0": 0, "1": 1})
    (photos / "2").mkdir()

    code = main(["data", "import", "--source", str(photos), "--data-dir", str(tmp_path / "data")])

    _, err = capfd.readouterr()
    assert code == EXIT_DATA_REJECTED
    assert err.strip() == f"tpu-pipeline: {photos / '2'}: a class folder without images"
    assert not (tmp_path / "data").exists()
