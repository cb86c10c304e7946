"""The Pusher's part: what it published, or why not, and the checks it ran on the way."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tpu_pipeline.components.pusher import (
    ALREADY_PUSHED_PROPERTY,
    MODEL_CARD_ERROR_PROPERTY,
    MODEL_CARD_PROPERTY,
    PUSH_REFUSED_PROPERTY,
    SERVING_CHECK_PROPERTY,
    SERVING_CHECK_SERVER_PROPERTY,
)
from tpu_pipeline.components.serving.server_check import ServingCheckError
from tpu_pipeline.pipeline.results.run_record import custom_property
from tpu_pipeline.pipeline.results.summary_part import (
    read_step,
    stop_step,
    summary_key,
    summary_part,
    text_lines,
)
from tpu_pipeline.pipeline.wiring.node_ids import NodeIds

if TYPE_CHECKING:
    from tpu_pipeline.pipeline.results.summary_reading import FinishedRun


@summary_part
class Push:
    """Where the Pusher published the blessed model, and what its serving check found."""

    pushed_model: str | None = summary_key(
        "where the Pusher published the model (the version folder)",
        null="nothing was pushed",
        example="output/tpu-pipeline-digits/serving_model/1795973625",
        default=None,
    )
    push_note: str = summary_key(
        "why it was or was not pushed: `new version`, `already served; not pushed again`, "
        "`not blessed`, the Pusher's refusal (a pin, a rolled-back model, or `held back by "
        "drift.block_push: ...` for a span that shifted), `pushed by the manual blessing`, "
        "or how the run stopped before the Pusher",
        example="new version",
        default="the run stopped before the Pusher",
    )
    serving_check: str | None = summary_key(
        "the Pusher's serving check: `passed (...)`, `failed: why` or `not run: ...`",
        null="nothing was pushed, and no check failed",
        example=(
            "passed (serving_default, images, pixels in 0.1 s; "
            "model_server.py, started ahead up in 0.6 s)"
        ),
        default=None,
    )
    serving_check_server: str | None = summary_key(
        "the server that ran it: `tensorflow_model_server`, or `model_server.py` (the Python "
        "server, where tensorflow_model_server is not on PATH)",
        null="no server started",
        example="model_server.py",
        default=None,
    )
    model_card: str | None = summary_key(
        "the pushed version's model card (model_card.json; model_card.html beside it)",
        null="nothing was pushed, or its card could not be written (`model_card_error`)",
        example="output/tpu-pipeline-digits/serving_model/1795973625/model_card.json",
        default=None,
    )
    model_card_error: str | None = summary_key(
        "why the pushed version has no card (the push stands without one)",
        null="nothing was pushed, or its card was written",
        example="OSError: [Errno 28] No space left on device",
        default=None,
    )

    @stop_step
    def push_after_stop(self, error: BaseException | None) -> None:
        """A candidate that failed the serving check stopped the run in the Pusher."""
        if isinstance(error, ServingCheckError):
            self.push_note = "the candidate failed the serving check"
            self.serving_check = f"failed: {error}"
            self.serving_check_server = error.server

    def add_push(self, pushed_property: Callable[[str], Any]) -> None:
        """Takes the push from the Pusher's PushedModel: `pushed_property(name)` reads one of
        its custom properties (None when unset), wherever the run recorded them."""
        if pushed_property("pushed"):
            self.pushed_model = pushed_property("pushed_destination")
            self.push_note = (
                "already served; not pushed again"
                if pushed_property(ALREADY_PUSHED_PROPERTY)
                else "new version"
            )
            self.serving_check = pushed_property(SERVING_CHECK_PROPERTY) or None
            self.serving_check_server = pushed_property(SERVING_CHECK_SERVER_PROPERTY) or None
            self.model_card = pushed_property(MODEL_CARD_PROPERTY) or None
            self.model_card_error = pushed_property(MODEL_CARD_ERROR_PROPERTY) or None
        else:
            self.push_note = pushed_property(PUSH_REFUSED_PROPERTY) or "not blessed"

    @read_step(50)
    def read_push(self, run: FinishedRun) -> None:
        pushed = run.record.node(NodeIds.PUSHER).outputs.get("pushed_model")
        if pushed:
            self.add_push(lambda name: custom_property(pushed[0], name))

    @text_lines(50)
    def push_lines(self) -> list[str]:
        lines = [f"pushed: {self.pushed_model or 'nothing'} ({self.push_note})"]
        if self.serving_check:
            lines.append(f"serving check: {self.serving_check}")
        if self.model_card:
            lines.append(f"model card: {self.model_card} (and model_card.html beside it)")
        elif self.model_card_error:
            lines.append(f"model card: not written ({self.model_card_error})")
        return lines
