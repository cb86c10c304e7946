"""Peak memory: of each component, and of the whole run (common.memory_meter).

Measured by the local runner as components finish; a report rebuilt from ML Metadata
takes the figures kept in the run folder (`pipeline/local/run_memory.py`).
"""

from __future__ import annotations

import dataclasses

from tpu_pipeline.common.memory_meter import SAMPLED, MemoryPeak
from tpu_pipeline.components.preflight.memory import describe as describe_bytes
from tpu_pipeline.pipeline.results.summary_part import summary_key, summary_part, text_lines


@dataclasses.dataclass(kw_only=True)
class MeasuredMemory:
    """Peak memory (common.memory_meter) of a component, or of a whole run.

    Each figure is None where it was not measured (the component never ran, or a
    report was rebuilt from ML Metadata).
    """

    peak_rss_bytes: int | None = summary_key(
        "the pipeline process's peak resident set size, in bytes",
        null="not measured",
        example=1_932_735_283,
        default=None,
    )
    peak_rss_measured: str | None = summary_key(
        "how it was measured: `high_water_mark` (exact) or `sampled` (a lower bound)",
        null="not measured",
        example="high_water_mark",
        default=None,
    )
    child_peak_rss_bytes: int | None = summary_key(
        "the largest peak of a child process, in bytes",
        null="no child process ran, or not measured",
        example=812_646_400,
        default=None,
    )
    tensorflow_peak_bytes: dict[str, int] | None = summary_key(
        "TensorFlow's allocator peak per device, in bytes",
        null="TensorFlow's runtime was not running or keeps no statistics, or not measured",
        example={"CPU:0": 402_653_184},
        default=None,
    )

    def add_memory(self, peak: MemoryPeak) -> None:
        """Takes the meter's figures."""
        self.peak_rss_bytes = peak.rss_bytes
        self.peak_rss_measured = peak.rss_measured
        self.child_peak_rss_bytes = peak.child_rss_bytes
        self.tensorflow_peak_bytes = peak.tensorflow_bytes

    def memory_peak(self) -> MemoryPeak | None:
        """The figures as the meter gave them, None if not measured."""
        if self.peak_rss_bytes is None or self.peak_rss_measured is None:
            return None
        return MemoryPeak(
            self.peak_rss_bytes,
            self.peak_rss_measured,
            self.child_peak_rss_bytes,
            self.tensorflow_peak_bytes,
        )

    def describe_memory(self, where: str = "") -> str:
        """`peak 1.9 GiB` (a sampled lower bound: `peak >=1.9 GiB`), `where` after it, then any
        child's and TensorFlow's largest device peak; empty when nothing was measured."""
        if self.peak_rss_bytes is None:
            return ""
        at_least = ">=" if self.peak_rss_measured == SAMPLED else ""
        parts = [f"peak {at_least}{describe_bytes(self.peak_rss_bytes)}{where}"]
        if self.child_peak_rss_bytes is not None:
            parts.append(f"child {describe_bytes(self.child_peak_rss_bytes)}")
        device, peak = max(
            (self.tensorflow_peak_bytes or {}).items(), key=lambda item: item[1], default=("", 0)
        )
        if peak:  # a device whose allocator held nothing says nothing here
            parts.append(f"TF {device} {describe_bytes(peak)}")
        return ", ".join(parts)


@summary_part
class RunMemory(MeasuredMemory):
    """The run's peaks: MeasuredMemory's figures are the largest of each over its components
    and the moments between them."""

    peak_rss_component: str | None = summary_key(
        "the component the process's peak was reached in",
        null="the peak was reached between components, or not measured",
        example="Trainer",
        default=None,
    )

    def add_run_memory(self, peak: MemoryPeak | None, component: str | None) -> None:
        """Takes the run's peaks (`tpu_pipeline.common.memory_meter.highest` of every interval)."""
        if peak is not None:
            self.add_memory(peak)
            self.peak_rss_component = component

    @text_lines(80)
    def memory_lines(self) -> list[str]:
        if self.peak_rss_bytes is None:
            return []
        where = f" in {self.peak_rss_component}" if self.peak_rss_component else ""
        return [f"memory: {self.describe_memory(where)}"]
