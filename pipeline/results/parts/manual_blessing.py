"""A blessing given by hand (`tpu-pipeline serving bless`, serving_ops/local/blessing.py):
it overrides the Evaluator's refusal, and the push it made is the run's push."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tpu_pipeline.pipeline.results.summary_part import read_step, summary_key, summary_part
from tpu_pipeline.serving_ops.local.blessing import manual_blessing_of

if TYPE_CHECKING:
    from tpu_pipeline.pipeline.results.summary_reading import FinishedRun


@summary_part
class ManualBlessing:
    """Who blessed the model by hand after the Evaluator refused it, and why."""

    manual_blessing: dict[str, str] | None = summary_key(
        "set when a person blessed the model the Evaluator refused: `reason` and `blessed_by`",
        null="nobody blessed the model by hand",
        example={"reason": "the drop is the new span's harder photos", "blessed_by": "ana"},
        default=None,
    )

    @read_step(60)  # after the Evaluator's blessing and the Pusher's push, which it overrides
    def read_manual_blessing(self, run: FinishedRun) -> None:
        if run.model is None:
            return
        recorded = manual_blessing_of(run.record.store, run.pipeline_name, run.model.id)
        if recorded is None:
            return
        self.manual_blessing = {"reason": recorded.reason, "blessed_by": recorded.blessed_by}
        refused = f"; the Evaluator refused: {self.blessing_reason}" if self.blessing_reason else ""
        self.blessing_reason = (
            f"blessed by hand by {recorded.blessed_by}: {recorded.reason}{refused}"
        )
        self.blessed = True
        if recorded.pushed_destination:
            self.pushed_model = recorded.pushed_destination
            self.push_note = "pushed by the manual blessing"
