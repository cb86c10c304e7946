"""How a run ended, in the few words every message about it uses.

Apart from the run summary (which imports TensorFlow's evaluation libraries) so that
`tpu-pipeline runs`, reading a summary back as JSON, says it in the same words as the
run's own webhook message and its tracker.
"""

from __future__ import annotations

from typing import Any

BLESSED_AND_PUSHED = "blessed and pushed"
BLESSED_NOT_PUSHED = "blessed, not pushed"
NOT_BLESSED = "not blessed"
DATA_REJECTED = "data rejected"
FAILED = "failed"
INTERRUPTED = "interrupted"


def run_outcome(summary: Any) -> str:
    """How the run ended: `summary` is a RunSummary, or anything with its `interrupted`,
    `data_rejected`, `succeeded`, `blessed` and `pushed_model` attributes."""
    if summary.interrupted:
        return INTERRUPTED
    if summary.data_rejected:
        return DATA_REJECTED
    if not summary.succeeded:
        return FAILED
    if not summary.blessed:
        return NOT_BLESSED
    return BLESSED_AND_PUSHED if summary.pushed_model else BLESSED_NOT_PUSHED
