"""The report's figures, drawn with matplotlib from the collected facts.

Each function returns a `matplotlib.figure.Figure` (or None when the run has
nothing to draw). Figures are built without pyplot, so no global state and no
display backend are involved: they render with Agg wherever the report runs.
"""

from __future__ import annotations

import io
import time

import numpy as np
from matplotlib.figure import Figure

from tpu_pipeline.components.evaluation.results import Calibration, ClassMetrics, SliceMetrics
from tpu_pipeline.components.explain.store import Attributions
from tpu_pipeline.pipeline.report.data_facts import SplitStatistics
from tpu_pipeline.pipeline.report.serving_facts import Samples
from tpu_pipeline.pipeline.results.run_summary import ComponentResult
from tpu_pipeline.pipeline.runs.history import RunEntry

STATUS_COLORS = {
    "executed": "tab:blue",
    "cached": "tab:green",
    "failed": "tab:red",
    "skipped": "lightgray",
}
SPLIT_COLORS = {"train": "tab:blue", "validation": "tab:orange", "eval": "tab:orange"}


def component_times(components: list[ComponentResult]) -> Figure | None:
    """Seconds per component, coloured by executed / cached / failed / skipped."""
    if not components:
        return None
    figure = Figure(figsize=(7, 0.35 * len(components) + 1), layout="constrained")
    axes = figure.subplots()
    names = [c.id for c in components][::-1]
    seconds = [c.seconds for c in components][::-1]
    colors = [STATUS_COLORS.get(c.status, "black") for c in components][::-1]
    axes.barh(names, seconds, color=colors)
    for row, component in enumerate(components[::-1]):
        axes.text(
            component.seconds,
            row,
            f" {component.status} {component.seconds:.1f} s",
            va="center",
            fontsize=8,
        )
    axes.set_xlabel("seconds")
    axes.set_xlim(0, max(max(seconds), 1e-3) * 1.35)
    axes.set_title("Components")
    return figure


def feature_histograms(
    splits: list[SplitStatistics],
    label_feature: str | None = None,
    class_names: list[str] | None = None,
) -> Figure | None:
    """TFDV's value histogram of every numeric feature, splits overlaid as fractions.

    The label's histogram names its classes (`class_names`, in label order) under
    the bars instead of their numbers.
    """
    names = sorted({f.name for split in splits for f in split.features if f.histogram})
    if not names:
        return None
    figure = Figure(figsize=(4.5 * len(names), 3.2), layout="constrained")
    for axes, name in zip(np.atleast_1d(figure.subplots(1, len(names))), names, strict=True):
        for split in splits:
            feature = next((f for f in split.features if f.name == name), None)
            if feature is None or not feature.histogram:
                continue
            lows, highs, counts = np.array(feature.histogram).T
            fractions = counts / max(counts.sum(), 1e-12)
            axes.bar(
                lows,
                fractions,
                width=highs - lows,
                align="edge",
                alpha=0.5,
                label=split.name,
                color=SPLIT_COLORS.get(split.name),
            )
        if name == label_feature and class_names:
            _class_ticks(axes, list(class_names), "x")
            axes.set_title(f"{name} classes")
            axes.set_ylabel("fraction of examples")
        else:
            axes.set_title(f"{name} values")
            axes.set_ylabel("fraction of values")
        axes.legend()
    return figure


def training_curves(scalars: dict[str, dict[str, list[float]]]) -> Figure | None:
    """Loss, accuracy, throughput and epoch time per epoch, train and validation."""
    if not scalars.get("train"):
        return None
    panels = [
        ("loss", "loss"),
        ("accuracy", "accuracy"),
        ("examples_per_second", "training examples / s"),
        ("seconds", "seconds per epoch"),
    ]
    figure = Figure(figsize=(10, 6.5), layout="constrained")
    for axes, (metric, title) in zip(figure.subplots(2, 2).flat, panels, strict=True):
        for split, values in scalars.items():
            if metric in values:
                epochs = np.arange(1, len(values[metric]) + 1)
                axes.plot(
                    epochs, values[metric], marker="o", label=split, color=SPLIT_COLORS.get(split)
                )
        axes.set_title(title)
        axes.set_xlabel("epoch")
        axes.xaxis.get_major_locator().set_params(integer=True)
        if axes.lines:
            axes.legend()
    return figure


def _class_ticks(axes, names: list[str], axis: str, positions=None) -> None:
    """Names the classes along `axis`; long or many names are turned to stay readable."""
    positions = np.arange(len(names)) if positions is None else positions
    if axis == "x":
        turned = sum(map(len, names)) > 40  # more than fits side by side
        axes.set_xticks(
            positions, names, rotation=45 if turned else 0, ha="right" if turned else "center"
        )
    else:
        axes.set_yticks(positions, names)


def confusion_matrix(counts: np.ndarray | None, class_names: list[str]) -> Figure | None:
    """Eval examples by true (rows) and predicted (columns) class, counts in the cells."""
    if counts is None:
        return None
    size = counts.shape[0]
    figure = Figure(figsize=(0.5 * size + 2.5, 0.5 * size + 2), layout="constrained")
    axes = figure.subplots()
    image = axes.imshow(counts, cmap="Blues")
    for (row, column), value in np.ndenumerate(counts):
        if value:
            color = "white" if value > counts.max() / 2 else "black"
            axes.text(column, row, f"{value:g}", ha="center", va="center", fontsize=8, color=color)
    _class_ticks(axes, class_names, "x")
    _class_ticks(axes, class_names, "y")
    axes.set_xlabel("predicted class")
    axes.set_ylabel("true class")
    axes.set_title("Confusion matrix (eval split)")
    figure.colorbar(image, ax=axes, shrink=0.8)
    return figure


def per_class_metrics(per_class: list[ClassMetrics]) -> Figure | None:
    """Precision and recall of each class side by side; a class never predicted says so."""
    if not per_class:
        return None
    figure = Figure(figsize=(max(6, 0.6 * len(per_class) + 2), 3.4), layout="constrained")
    axes = figure.subplots()
    width = 0.4
    positions = np.arange(len(per_class))
    for offset, metric in enumerate(("precision", "recall")):
        values = [getattr(c, metric) for c in per_class]
        shown = [np.nan if value is None else value for value in values]
        axes.bar(positions + offset * width, shown, width, label=metric)
    for position, metrics in zip(positions, per_class, strict=True):
        if metrics.examples and not metrics.predicted:
            # Precision is 0 of 0 there: no bar, but say why instead of leaving a gap.
            axes.text(
                position + width / 2, 0.02, "never\npredicted", ha="center", va="bottom", fontsize=7
            )
    _class_ticks(axes, [c.class_name for c in per_class], "x", positions + width / 2)
    axes.set_xlabel("class")
    axes.set_ylim(0, 1.0)  # from 0: a bar's height is its value, however low
    axes.set_title("Per-class metrics (eval split)")
    figure.legend(loc="outside right upper")  # bars at 0 would hide under a legend inside
    return figure


def slice_accuracies(
    slices: list[SliceMetrics], overall: float | None, margin: float | None
) -> Figure | None:
    """Accuracy of each slice as a bar, the overall accuracy and the flagging line drawn;
    flagged slices in red, each bar labelled with its example count."""
    if not slices or overall is None or margin is None:
        return None
    figure = Figure(figsize=(7, 0.28 * len(slices) + 1.2), layout="constrained")
    axes = figure.subplots()
    rows = np.arange(len(slices))[::-1]  # the first slice on top
    colors = ["tab:red" if s.flagged else "tab:blue" for s in slices]
    axes.barh(rows, [s.accuracy for s in slices], color=colors)
    for row, s in zip(rows, slices, strict=True):
        axes.text(s.accuracy, row, f" {s.accuracy:.3f} ({s.examples:,})", va="center", fontsize=7)
    axes.set_yticks(rows, [f"{s.kind}={s.value}" for s in slices], fontsize=7)
    axes.axvline(overall, color="black", linewidth=1, label=f"overall {overall:.3f}")
    axes.axvline(
        overall - margin, color="tab:red", linestyle="--", linewidth=1,
        label=f"flagged below {overall - margin:.3f}",
    )  # fmt: skip
    axes.set_xlim(0, 1.25)  # room for the labels right of a bar at 1.0
    axes.set_xlabel("accuracy (eval examples in brackets)")
    axes.set_title("Accuracy per slice (eval split)")
    axes.legend(loc="lower right", fontsize=7)
    return figure


def reliability_diagram(calibration: Calibration | None) -> Figure | None:
    """How often the model is right against how sure it says it is, per bucket of its top
    probability; the diagonal is a perfectly calibrated model, bar widths the buckets."""
    if calibration is None:
        return None
    figure = Figure(figsize=(7, 3.4), layout="constrained")
    accuracy_axes, count_axes = figure.subplots(1, 2)
    buckets = calibration.buckets
    lows = [b.low for b in buckets]
    widths = [b.high - b.low for b in buckets]
    accuracy_axes.bar(lows, [b.accuracy for b in buckets], widths, align="edge", label="right")
    accuracy_axes.plot(
        [b.confidence for b in buckets], [b.accuracy for b in buckets], "o", color="tab:red",
        label="mean top probability",
    )  # fmt: skip
    accuracy_axes.plot([0, 1], [0, 1], "--", color="gray", label="calibrated")
    accuracy_axes.set_xlim(0, 1)
    accuracy_axes.set_ylim(0, 1.02)
    accuracy_axes.set_xlabel("top probability")
    accuracy_axes.set_ylabel("share right")
    accuracy_axes.set_title(
        f"Reliability (ECE {calibration.expected_calibration_error:.4f})", fontsize=10
    )
    accuracy_axes.legend(loc="upper left", fontsize=7)
    count_axes.bar(lows, [b.examples for b in buckets], widths, align="edge", color="tab:gray")
    count_axes.set_xlim(0, 1)
    count_axes.set_xlabel("top probability")
    count_axes.set_ylabel("eval examples")
    count_axes.set_title("How often it is that sure", fontsize=10)
    return figure


def candidate_vs_baseline(
    candidate: float | None, baseline: float | None, lower_bound: float | None
) -> Figure | None:
    """The candidate's accuracy next to the baseline's, with the lower bound drawn."""
    if candidate is None:
        return None
    names = ["candidate"] + (["baseline"] if baseline is not None else [])
    values = [candidate] + ([baseline] if baseline is not None else [])
    figure = Figure(figsize=(4.5, 3), layout="constrained")
    axes = figure.subplots()
    bars = axes.bar(names, values, color=["tab:blue", "tab:gray"][: len(values)])
    axes.bar_label(bars, fmt="%.4f")
    if lower_bound is not None:
        axes.axhline(
            lower_bound, color="tab:red", linestyle="--", label=f"lower bound {lower_bound:.2f}"
        )
        axes.legend(loc="lower right")
    # Headroom above 1.0 keeps the value labels clear of the title.
    axes.set_ylim(min([*values, lower_bound or 1.0]) - 0.05, 1.02)
    axes.set_ylabel("accuracy")
    axes.set_title("Candidate vs baseline")
    return figure


def accuracy_history(runs: list[RunEntry], current: RunEntry | None) -> Figure | None:
    """Eval accuracy of the last runs (`runs` newest first), oldest on the left: blessed runs
    green, refused ones red, with each one's baseline as a grey tick; None under two runs."""
    evaluated = [run for run in reversed(runs) if run.accuracy is not None]
    if len(evaluated) < 2:
        return None
    figure = Figure(figsize=(7, 2.8), layout="constrained")
    axes = figure.subplots()
    positions = np.arange(len(evaluated))
    accuracies = [run.accuracy for run in evaluated]
    axes.plot(positions, accuracies, color="lightgray", zorder=1)
    colors = ["tab:green" if run.blessed else "tab:red" for run in evaluated]
    sizes = [
        90 if current is not None and run.run_id == current.run_id else 40 for run in evaluated
    ]
    axes.scatter(positions, accuracies, c=colors, s=sizes, zorder=2)
    baselines = [(i, run.baseline_accuracy) for i, run in enumerate(evaluated)]
    shown = [(i, b) for i, b in baselines if b is not None]
    if shown:
        axes.scatter(*zip(*shown, strict=True), marker="_", s=200, color="gray", label="baseline")
        axes.legend(loc="lower left", fontsize=8)
    for position, accuracy in zip(positions, accuracies, strict=True):
        axes.annotate(
            f"{accuracy:.3f}",
            (position, accuracy),
            textcoords="offset points",
            xytext=(0, 6),
            ha="center",
            fontsize=7,
        )
    axes.set_xticks(
        positions,
        [
            f"#{run.number}\n{time.strftime('%m-%d %H:%M', time.localtime(run.started))}"
            for run in evaluated
        ],
        fontsize=7,
    )
    low = min(accuracies + [b for _, b in shown])
    axes.set_ylim(max(0.0, low - 0.05), 1.02)
    axes.set_xlim(-0.5, len(evaluated) - 0.5)
    axes.set_ylabel("eval accuracy")
    axes.set_title("Eval accuracy of the last runs (green: blessed, red: not)")
    return figure


def sample_predictions(
    samples: Samples | None, class_names: list[str], columns: int = 8
) -> Figure | None:
    """Eval images titled `predicted (true)` by class name, mistakes in red."""
    if samples is None or not len(samples.images):
        return None
    rows = -(-len(samples.images) // columns)
    figure = Figure(figsize=(1.4 * columns, 1.8 * rows + _SUPTITLE_INCHES))
    grid = _ImageGrid(figure, rows, columns, title_lines=2, title_points=8)
    for index, image in enumerate(samples.images):
        if image.shape[-1] == 1:
            grid.show(index, image[..., 0], cmap="gray_r")
        else:
            grid.show(index, _unit_range(image))
        wrong = samples.predicted[index] != samples.true_labels[index]
        predicted = class_names[samples.predicted[index]]
        true = class_names[samples.true_labels[index]]
        grid.title(
            index,
            f"{predicted} ({true})\n{samples.confidence[index]:.0%}",
            color="tab:red" if wrong else "black",
        )
    figure.suptitle("predicted (true) and confidence; mistakes in red", fontsize=9)
    return figure


def attribution_maps(
    attributions: Attributions | None, class_names: list[str], pairs_per_row: int = 4
) -> Figure | None:
    """Each explained image beside its attribution map laid over it, titled `true -> predicted`
    and the probability; mistakes in red."""
    if attributions is None or not attributions.chosen:
        return None
    count = len(attributions.chosen)
    rows = -(-count // pairs_per_row)
    title_lines = 3 if any(answer.source for answer in attributions.chosen) else 2
    figure = Figure(figsize=(2.6 * pairs_per_row, 1.7 * rows + _SUPTITLE_INCHES))
    grid = _ImageGrid(figure, rows, 2 * pairs_per_row, title_lines, title_points=7)
    for index, answer in enumerate(attributions.chosen):
        image = attributions.images[index]
        shown = image[..., 0] if image.shape[-1] == 1 else image
        grid.show(2 * index, shown, cmap="gray", vmin=0, vmax=255)
        grid.show(2 * index + 1, shown, cmap="gray", vmin=0, vmax=255)
        grid.show(
            2 * index + 1, attributions.maps[index], cmap="inferno", alpha=0.6, vmin=0, vmax=1
        )
        true = class_names[answer.label] if answer.label is not None else "?"
        title = f"{true} -> {class_names[answer.predicted]}\n{answer.probability:.1%}"
        if answer.source:  # a batch job's record: the end of its file name and its index
            title += f"\n{answer.source.rsplit('/', 1)[-1][-24:]}"
        grid.title(2 * index, title, color="tab:red" if answer.mistake else "black")
    figure.suptitle(
        f"true (? if unlabelled) -> predicted and its probability, beside the "
        f"{attributions.method_name} map (bright: drove the prediction); mistakes in red",
        fontsize=8,
    )
    return figure


# Room above an image grid for its one-line suptitle.
_SUPTITLE_INCHES = 0.35
# Space between two images of a row, as a fraction of a cell's width.
_IMAGE_GAP = 0.08
# Between an image and its title, as matplotlib puts an axes' title.
_TITLE_PAD_POINTS = 6.0


class _ImageGrid:
    """Cells of `rows` x `columns` images, each with room for its title above it, on ONE axes.

    An axes per image cost more than everything else in drawing the report: creating
    ~30 axes and drawing each one's frame, ticks and layout for pictures that show none
    of them. Here the images are placed on one hidden axes whose units are the figure's
    inches (top-left origin), each fitted into its cell keeping its aspect, centred.
    """

    def __init__(
        self, figure: Figure, rows: int, columns: int, title_lines: int, title_points: float
    ):
        width, height = figure.get_size_inches()
        left, bottom = 0.01, 0.02
        top = 1 - _SUPTITLE_INCHES / height
        self._axes = figure.add_axes((left, bottom, 1 - 2 * left, top - bottom))
        self._axes.set_axis_off()
        self._span = ((1 - 2 * left) * width, (top - bottom) * height)
        self._columns = columns
        self._cell = (self._span[0] / columns, self._span[1] / rows)
        self._title_inches = title_lines * title_points * 1.3 / 72 + 0.05  # lines and a gap
        self._title_points = title_points

    def _box(self, index: int) -> tuple[float, float, float, float]:
        """Cell `index`'s image box: left, top, width, height in inches from the top-left."""
        row, column = divmod(index, self._columns)
        cell_width, cell_height = self._cell
        width = cell_width * (1 - _IMAGE_GAP)
        left = column * cell_width + (cell_width - width) / 2
        return left, row * cell_height + self._title_inches, width, cell_height - self._title_inches

    def show(self, index: int, image: np.ndarray, **imshow_kwargs) -> None:
        """Draws `image` in cell `index`, fitted to its box; a second call draws over the first."""
        left, top, width, height = self._box(index)
        scale = min(width / image.shape[1], height / image.shape[0])
        shown_width, shown_height = image.shape[1] * scale, image.shape[0] * scale
        x0, y0 = left + (width - shown_width) / 2, top + (height - shown_height) / 2
        extent = (x0, x0 + shown_width, y0 + shown_height, y0)
        self._axes.imshow(image, extent=extent, aspect="auto", **imshow_kwargs)
        # imshow fits the limits to each image it adds: put back the whole grid's.
        self._axes.set_xlim(0, self._span[0])
        self._axes.set_ylim(self._span[1], 0)

    def title(self, index: int, text: str, color: str) -> None:
        """`text` centred above cell `index`'s box, where an axes' title would be."""
        left, top, width, _ = self._box(index)
        self._axes.annotate(
            text,
            (left + width / 2, top),
            xytext=(0, _TITLE_PAD_POINTS),
            textcoords="offset points",
            ha="center",
            va="baseline",
            fontsize=self._title_points,
            color=color,
        )


def _unit_range(image: np.ndarray) -> np.ndarray:
    low, high = image.min(), image.max()
    return (image - low) / (high - low) if high > low else np.zeros_like(image)


def png_bytes(figure: Figure) -> bytes:
    """The figure as a PNG."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()
