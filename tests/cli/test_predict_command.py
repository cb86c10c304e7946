"""`predict` hands Beam its arguments as given: Dataflow's are accepted before anything runs;
an odd photo folder given alone is refused in one line before any model is read."""

from __future__ import annotations

import pytest
from apache_beam.options.pipeline_options import (
    GoogleCloudOptions,
    PipelineOptions,
    StandardOptions,
)

from tests.cli.digit_photos import write_digit_photos
from tpu_pipeline.cli.main import EXIT_DATA_REJECTED, _build_parser, main
from tpu_pipeline.cli.predict_command import beam_args


def test_beam_args_after_the_double_dash_and_from_beam_arg_reach_pipeline_options():
    args = _build_parser().parse_args(
        [
            "predict",
            "--model=m",
            "--data-dir=gs://bucket/new",
            "--output=gs://bucket/p.jsonl",
            "--beam-arg=--runner=DataflowRunner",
            "--",
            "--project=team-project",
            "--region=europe-west4",
            "--temp_location=gs://bucket/tmp",
        ]
    )
    assert (args.top_k, args.output) == (3, "gs://bucket/p.jsonl")
    options = PipelineOptions(beam_args(args))
    cloud = options.view_as(GoogleCloudOptions)
    assert options.view_as(StandardOptions).runner == "DataflowRunner"
    assert (cloud.project, cloud.region, cloud.temp_location) == (
        "team-project",
        "europe-west4",
        "gs://bucket/tmp",
    )


def _empty_class(photos):
    write_digit_photos(photos, per_class=6, classes={"0": 0})
    (photos / "1").mkdir()
    return f"{photos / '1'}: a class folder without images"


def _two_depths(photos):
    write_digit_photos(photos, per_class=6, classes={"0": 0, "1": 1})
    write_digit_photos(photos, per_class=1, classes={"": 2})
    return "images at two depths"


def _one_class(photos):
    write_digit_photos(photos, per_class=12, classes={"0": 0})
    return "one class folder (0); a classifier needs at least two"


def _three_photos(photos):
    write_digit_photos(photos, per_class=3, classes={"": 4})
    return f"{photos}: 3 photos in all; at least 10 are needed"


@pytest.mark.parametrize("make", [_empty_class, _two_depths, _one_class, _three_photos])
def test_an_odd_photo_folder_stops_predict_in_one_line_with_exit_3(make, tmp_path, capfd):
    photos = tmp_path / "photos"
    expected = make(photos)
    output = tmp_path / "p.csv"

    code = main(
        ["predict", "--model", str(tmp_path / "model"), "--data-dir", str(photos), "--output",
         str(output)]
    )  # fmt: skip

    _, err = capfd.readouterr()
    assert code == EXIT_DATA_REJECTED
    (line,) = err.strip().splitlines()
    assert line.startswith("tpu-pipeline: ") and expected in line, line
    assert not output.exists()
