"""Peak memory between two marks: this process's resident set, its children's, TensorFlow's.

The local runner runs every component in one process, one after another, and
marks the meter as each starts and ends. The kernel's high-water mark (VmHWM,
kept on every page fault) is never reset here: writing "5" to
/proc/self/clear_refs would reset it, but the same figure is what a parent's
`wait4`, `/usr/bin/time` and `benchmarks/rss.py` report for the whole process
(reset, a run's 500 MB peak came back as 14 MB). Instead:
- an interval in which VmHWM rose peaked at the new VmHWM, exactly
  (`HIGH_WATER_MARK`): the component that sets the run's peak is always measured so;
- any other interval peaked at the largest resident size a thread sampled every
  `SAMPLE_SECONDS` (`SAMPLED`): a lower bound that can miss a shorter spike.

Child processes (the serving check's model server, Beam workers, a step run in
a child to give its memory back) are sampled by the same thread: each child's
own VmHWM, or its resident size where there is no /proc. `getrusage
(RUSAGE_CHILDREN).ru_maxrss` is not used: it is never reset, and a child
started by fork and exec carries the forking process's high-water mark (here
`true` started from a 500 MB Python process reported 514 MB). A child forked
without exec (multiprocessing's "fork") counts the pages it still shares with
this process in its own VmHWM, so its figure is an upper bound.

TensorFlow's figure is its allocator's peak per device
(`tf.config.experimental.get_memory_info`: GPU and TPU memory, and host memory
where the CPU allocator keeps statistics, as TF 2.16's does here). It is read
only when TensorFlow is already imported and its runtime initialised: asking
earlier would initialise it, after which a Trainer can no longer set up
logical devices.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
import sys
import threading
from collections.abc import Iterable

import psutil

SAMPLE_SECONDS = 0.1  # this process's resident size; children every CHILD_SAMPLE_EVERY samples
CHILD_SAMPLE_EVERY = 5  # listing every process takes ~5 ms here
HIGH_WATER_MARK = "high_water_mark"  # exact: the kernel's VmHWM rose in the interval
SAMPLED = "sampled"  # a lower bound: the largest resident size sampled in the interval

_VM_HWM = re.compile(r"^VmHWM:\s+(\d+) kB$", re.MULTILINE)


@dataclasses.dataclass(frozen=True)
class MemoryPeak:
    """The peaks of one interval between two marks, in bytes."""

    rss_bytes: int  # this process's peak resident set size
    rss_measured: str  # HIGH_WATER_MARK or SAMPLED
    child_rss_bytes: int | None  # the largest peak of a child process seen; None: none ran
    # TensorFlow's allocator peak per device ("CPU:0", "GPU:0", "TPU:0"); None: TF not running.
    tensorflow_bytes: dict[str, int] | None


def highest(
    labelled: Iterable[tuple[str | None, MemoryPeak]],
) -> tuple[MemoryPeak | None, str | None]:
    """The largest of each figure over `(label, peak)` pairs (a run's steps), and the label of
    the one with the largest resident size; (None, None) when there are none."""
    labelled = list(labelled)
    if not labelled:
        return None, None
    label, top = max(labelled, key=lambda pair: pair[1].rss_bytes)
    peaks = [peak for _, peak in labelled]
    children = [p.child_rss_bytes for p in peaks if p.child_rss_bytes is not None]
    devices: dict[str, int] = {}
    for peak in peaks:
        for device, value in (peak.tensorflow_bytes or {}).items():
            devices[device] = max(devices.get(device, 0), value)
    combined = MemoryPeak(
        top.rss_bytes, top.rss_measured, max(children, default=None), devices or None
    )
    return combined, label


def _high_water_mark(pid: int | str = "self") -> int | None:
    """A process's VmHWM in bytes; None if it has ended or there is no /proc."""
    try:
        status = pathlib.Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    match = _VM_HWM.search(status)
    return int(match[1]) * 1024 if match else None


def _child_peak(child: psutil.Process) -> int | None:
    """A child's own peak (VmHWM), or its resident size now where there is no /proc."""
    peak = _high_water_mark(child.pid)
    if peak is not None:
        return peak
    try:
        return child.memory_info().rss
    except psutil.Error:  # it ended meanwhile
        return None


def tensorflow_peaks() -> dict[str, int] | None:
    """TensorFlow's allocator peak per device since the last call, then resets it.

    None when TensorFlow is not imported or its runtime not initialised (asking
    would initialise it), or when no device keeps statistics.
    """
    if "tensorflow" not in sys.modules:
        return None
    import tensorflow as tf
    from tensorflow.python.eager import context

    # No public call says whether the runtime is up without bringing it up.
    if not getattr(context.context(), "_initialized", False):
        return None
    peaks = {}
    for device in tf.config.list_logical_devices():
        name = device.name.removeprefix("/device:")
        try:
            peaks[name] = int(tf.config.experimental.get_memory_info(name)["peak"])
            tf.config.experimental.reset_memory_stats(name)
        except ValueError:  # "Memory statistics not tracked" on this device
            continue
    return peaks or None


class MemoryMeter:
    """Measures peak memory in the intervals between calls to `mark`.

    The sampling thread runs between `start` and `stop` (or inside `with`); `mark`
    works after `stop` too, sampling once itself.
    """

    def __init__(self, sample_seconds: float = SAMPLE_SECONDS):
        self._sample_seconds = sample_seconds
        self._process = psutil.Process()
        self._lock = threading.Lock()
        self._high_water = _high_water_mark()
        self._sampled_rss = self._process.memory_info().rss
        self._child_rss: int | None = None
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._sample_until_stopped, daemon=True)
        tensorflow_peaks()  # TensorFlow's first interval starts now too

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()

    def __enter__(self) -> MemoryMeter:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def mark(self) -> MemoryPeak:
        """Ends the current interval, returning its peaks, and starts the next one."""
        self._sample(children=True)  # a child still running counts for this interval
        with self._lock:
            high_water = _high_water_mark()
            if high_water is not None and high_water > (self._high_water or 0):
                rss, measured = high_water, HIGH_WATER_MARK
            else:
                rss, measured = self._sampled_rss, SAMPLED
            child_rss = self._child_rss
            self._high_water = high_water
            self._sampled_rss = self._process.memory_info().rss
            self._child_rss = None
        return MemoryPeak(rss, measured, child_rss, tensorflow_peaks())

    def _sample_until_stopped(self) -> None:
        count = 0
        while not self._stopped.wait(self._sample_seconds):
            count += 1
            self._sample(children=count % CHILD_SAMPLE_EVERY == 0)

    def _sample(self, children: bool) -> None:
        rss = self._process.memory_info().rss
        child_peaks = []
        if children:
            try:
                found = self._process.children(recursive=True)
            except psutil.Error:
                found = []
            child_peaks = [peak for peak in map(_child_peak, found) if peak is not None]
        with self._lock:
            self._sampled_rss = max(self._sampled_rss, rss)
            if child_peaks:
                self._child_rss = max(self._child_rss or 0, *child_peaks)
