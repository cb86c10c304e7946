"""The run summary is assembled from typed parts: every key documented, steps in order."""

from __future__ import annotations

import dataclasses
import json

from tpu_pipeline.cli.stop_summary import stop_summary
from tpu_pipeline.common.config import ConfigError
from tpu_pipeline.pipeline.results.run_summary import PARTS, RunSummary
from tpu_pipeline.pipeline.results.summary_part import (
    READ_ORDER,
    SCHEMA_VERSION,
    TEXT_ORDER,
    key_doc,
    marked_methods,
    read_step,
    text_lines,
)


def test_the_summary_json_and_the_stop_summary_say_their_schema_version():
    summary = RunSummary.without_results("tpu-pipeline-digits", [], None, None)

    assert json.loads(summary.to_json())["schema_version"] == SCHEMA_VERSION == 1
    assert stop_summary("p", ConfigError("bad"), None)["schema_version"] == 1


def test_every_key_of_the_summary_says_what_it_holds_when_it_is_null_and_an_example():
    for field in dataclasses.fields(RunSummary):
        doc = key_doc(field)
        assert doc is not None, f"{field.name} is declared without summary_key"
        nullable = "None" in str(field.type).split(" | ")
        assert doc.holds and (doc.null is not None) == nullable, field.name
        json.dumps(doc.example)


def test_every_key_belongs_to_exactly_one_part():
    owners = {}
    for part in PARTS:
        for field in dataclasses.fields(part):
            owners.setdefault(field.name, set()).add(part.__name__)

    assert {name for name, parts in owners.items() if len(parts) > 1} == set()
    assert set(owners) | {"schema_version"} == {f.name for f in dataclasses.fields(RunSummary)}


def test_steps_and_lines_of_every_part_run_in_their_order_across_parts():
    calls = []

    class Early:
        @read_step(10)
        def read_early(self, run):
            calls.append("early")

        @text_lines(30)
        def early_lines(self):
            return ["third"]

    class Late:
        @read_step(20)
        def read_late(self, run):
            calls.append("late")

        @text_lines(10)
        def first_lines(self):
            return ["first"]

        @text_lines(20)
        def second_lines(self):
            return ["second"]

    for _, step in marked_methods((Late, Early), READ_ORDER):
        step(None, None)
    lines = [
        line for _, method in marked_methods((Late, Early), TEXT_ORDER) for line in method(None)
    ]

    assert calls == ["early", "late"]
    assert lines == ["first", "second", "third"]
