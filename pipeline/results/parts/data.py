"""The data's part: the schema a run bootstrapped, and the settings chosen from the data."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tpu_pipeline.pipeline.results.run_record import SCHEMA_BOOTSTRAPPED_PROPERTY
from tpu_pipeline.pipeline.results.summary_part import read_step, summary_key, summary_part
from tpu_pipeline.pipeline.wiring.node_ids import NodeIds

if TYPE_CHECKING:
    from tpu_pipeline.pipeline.results.summary_reading import FinishedRun


@summary_part
class DataChoices:
    """What the run made of a new dataset before training: its schema and its defaults."""

    schema_bootstrapped: str | None = summary_key(
        "the schema this run bootstrapped for a new dataset (to review and commit)",
        null="the dataset had a schema",
        example="output/tpu-pipeline-photos/schema/schema.pbtxt",
        default=None,
    )
    chosen_defaults: dict[str, Any] | None = summary_key(
        "the fields chosen from the data (pipeline/wiring/recipe.py): value and reason each, "
        "the one line saying what a pretrained backbone out of reach was replaced with, and "
        "`budget`, the time budget's plan when the epochs came from one (the probed rate, "
        "epochs, what they buy, the minutes planned; else null)",
        null="nothing was chosen from the data (every field set, or not a folder of photos), "
        "and in a report rebuilt after the run",
        example={
            "fields": {"trainer.per_replica_batch_size": {"value": 32, "reason": "..."}},
            "fallback": None,
            "budget": None,
        },
        default=None,
    )

    @read_step(10)
    def read_data_choices(self, run: FinishedRun) -> None:
        self.schema_bootstrapped = run.record.noted(
            NodeIds.SCHEMA_GEN, SCHEMA_BOOTSTRAPPED_PROPERTY
        )
