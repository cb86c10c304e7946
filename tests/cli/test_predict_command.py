"""`predict` hands Beam its arguments as given: Dataflow's are accepted before anything runs."""

from __future__ import annotations

from apache_beam.options.pipeline_options import (
    GoogleCloudOptions,
    PipelineOptions,
    StandardOptions,
)

from tpu_pipeline.cli.main import _build_parser
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
