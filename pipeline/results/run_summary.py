"""The summary of a run: every part in `pipeline/results/parts/`, in one object.

Printed for people (`to_text`) and written as JSON (`--summary-json`) for scripts and
CI: one flat object of every part's keys plus `schema_version`. Each part owns its keys,
how they are read from a finished run (`summary_reading.summarize_run`) and the lines
they print; this module only puts them together.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import pkgutil

from tpu_pipeline.pipeline.results import parts
from tpu_pipeline.pipeline.results.parts.outcome import ComponentResult, outcome_of
from tpu_pipeline.pipeline.results.summary_part import (
    SCHEMA_VERSION,
    STOP_STEP,
    TEXT_ORDER,
    marked_methods,
    registered_parts,
    summary_key,
)

for _module in pkgutil.iter_modules(parts.__path__):
    importlib.import_module(f"{parts.__name__}.{_module.name}")
PARTS = registered_parts()


@dataclasses.dataclass(kw_only=True)
class RunSummary(*PARTS):
    """Everything a person or a script needs to know about one run."""

    schema_version: int = summary_key(
        "the version of this JSON's shape: raised when a key is renamed, removed or changes "
        "meaning, not when one is added",
        example=SCHEMA_VERSION,
        default=SCHEMA_VERSION,
    )

    @classmethod
    def without_results(
        cls,
        pipeline: str,
        components: list[ComponentResult],
        error: BaseException | None,
        log_file: str | None,
    ) -> RunSummary:
        """A summary with the run's outcome but no metrics, blessing or push yet."""
        summary = cls(**outcome_of(pipeline, components, error, log_file))
        for _, step in marked_methods(PARTS, STOP_STEP):
            step(summary, error)
        return summary

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    def to_text(self) -> str:
        """The result lines printed on stdout after the progress lines."""
        return "\n".join(
            line for _, lines in marked_methods(PARTS, TEXT_ORDER) for line in lines(self)
        )
