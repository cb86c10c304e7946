"""A pushed model's card as the Model Card Toolkit's JSON schema (v0.0.2) holds it.

The Toolkit itself no longer installs beside TFMA 0.47, so the card is built here,
field for field in its schema: `model_details`, `model_parameters`,
`quantitative_analysis` and `considerations`, and nothing at the top level beside them
(the schema forbids it). What the schema has no field for (the blessing, the serving
check, the ML Metadata artifacts) goes in the fields it does have, in words:
`model_details.documentation` and `model_details.version.diff`.
"""

from __future__ import annotations

from typing import Any

from tpu_pipeline.components.model_card.facts import CardFacts
from tpu_pipeline.components.serving.temperature import TEMPERATURE_INFO_KEY

SCHEMA_VERSION = "0.0.2"
# The fields of the schema's top level; the schema allows no others.
TOP_LEVEL_FIELDS = (
    "schema_version",
    "model_details",
    "model_parameters",
    "quantitative_analysis",
    "considerations",
)
# Overall metrics the card lists, as TFMA names them; the others are counts or duplicates.
CARD_METRICS = {"accuracy": "accuracy", "example_count": "eval examples"}
# A class the eval split holds fewer examples of has metrics too uncertain to trust.
FEW_EXAMPLES = 20
# An expected calibration error above this makes "probability 0.99" mean much less.
LOOSE_CALIBRATION = 0.05


def model_card(facts: CardFacts) -> dict[str, Any]:
    """The card, as plain JSON data in the Model Card Toolkit's schema."""
    return {
        "schema_version": SCHEMA_VERSION,
        "model_details": _model_details(facts),
        "model_parameters": _model_parameters(facts),
        "quantitative_analysis": {"performance_metrics": performance_metrics(facts)},
        "considerations": _considerations(facts),
    }


def short_description(made: dict[str, Any], card_page: str, limit: int = 1000) -> str:
    """A few lines of a card for a field of limited length (a registry version's
    description): the overview, what changed, the blessing, the overall metrics and
    where the whole card is."""
    details = made["model_details"]
    overall = [
        f"{m['type']} {m['value']:.4f}"
        if isinstance(m["value"], float)
        else f"{m['type']} {m['value']}"
        for m in made["quantitative_analysis"]["performance_metrics"]
        if "slice" not in m and m["type"] in CARD_METRICS.values()
    ]
    blessing = details["documentation"].split("\n\n")[0]
    lines = [details["overview"], details["version"]["diff"], blessing, "; ".join(overall)]
    tail = f"Model card: {card_page}"
    text = "\n".join(line for line in lines if line)
    return text[: max(0, limit - len(tail) - 1)] + "\n" + tail


def model_name(facts: CardFacts) -> str:
    return f"{facts.dataset.name} {facts.training.get('model', 'model')}"


def _image_shape(facts: CardFacts) -> str:
    return "x".join(str(side) for side in facts.dataset.image_shape)


def _model_details(facts: CardFacts) -> dict[str, Any]:
    names = ", ".join(facts.dataset.class_names)
    overview = (
        f"{facts.training.get('model', 'A model')} classifying {_image_shape(facts)} images "
        f"into {facts.dataset.num_classes} classes ({names}); version {facts.version}, "
        f"pushed to {facts.version_dir}."
    )
    return {
        "name": model_name(facts),
        "overview": overview,
        "documentation": "\n\n".join(_documentation(facts)),
        "version": {"name": facts.version, "date": facts.date, "diff": _version_diff(facts)},
        "references": [{"reference": _as_uri(facts.version_dir)}],
    }


def _as_uri(path: str) -> str:
    return path if "://" in path else f"file://{path}"


def _documentation(facts: CardFacts) -> list[str]:
    blessing = facts.blessing
    paragraphs = [
        f"Blessed: {'yes' if blessing.blessed else 'no'}, by {blessing.by}: {blessing.reason}."
    ]
    if facts.serving_check:
        paragraphs.append(f"Serving check before the push: {facts.serving_check}.")
    paragraphs.append(
        "Made from ML Metadata: "
        + "; ".join(
            f"{s.kind} {s.id if s.id is not None else '(no id)'} at {s.uri}" for s in facts.sources
        )
        + "."
    )
    return paragraphs


def _version_diff(facts: CardFacts) -> str:
    accuracy = facts.metrics.get("accuracy")
    if facts.baseline_metrics is None or accuracy is None:
        return "The first blessed model: no earlier model to compare with."
    before = facts.baseline_metrics.get("accuracy")
    if before is None:
        return "Compared with the last blessed model, which has no accuracy on record."
    baseline = (
        f" (model {facts.blessing.baseline_model_id} in ML Metadata)"
        if facts.blessing.baseline_model_id
        else ""
    )
    compared = facts.baseline_comparison
    paired = f" The Evaluator found it {compared.describe()}." if compared else ""
    return (
        f"Eval accuracy {accuracy:.4f} against {before:.4f} for the last blessed model"
        f"{baseline} on the same eval split ({accuracy - before:+.4f}).{paired}"
    )


def _spans(facts: CardFacts, newest: int | None) -> str:
    """Which spans a split holds: the run's span, or with `dataset.span_window` above 1 the
    window's (ExampleGen's artifact carries only the newest)."""
    if newest is None:
        return ""
    if facts.dataset.mixes_spans:
        return f" of the {facts.dataset.span_window} newest spans up to span {newest}"
    return f" of span {newest}"


def _model_parameters(facts: CardFacts) -> dict[str, Any]:
    shape = facts.dataset.image_shape
    return {
        "model_architecture": _architecture(facts),
        "data": [
            {
                "name": f"{facts.dataset.name} {split.name} split",
                "description": (
                    f"{split.examples:,} examples"
                    + _spans(facts, split.span)
                    + f", {_image_shape(facts)} images, used for "
                    + ("evaluation" if split.name == "eval" else "training")
                    + " (TFDV statistics of StatisticsGen)"
                    + (_class_counts(facts) if split.name == "eval" else "")
                    + "."
                ),
            }
            for split in facts.data
        ],
        "input_format": (
            "serving_default: serialized tf.Example records (input 'examples'); "
            + ("images: encoded PNG or JPEG bytes; " if shape[2] in (1, 3) else "")
            + f"pixels: float32 pixels of shape [batch, {', '.join(map(str, shape))}]."
        ),
        "output_format": (
            f"probabilities: float32 [batch, {facts.dataset.num_classes}], one per class in "
            "label order: " + ", ".join(facts.dataset.class_names) + "." + _temperature(facts)
        ),
    }


def _temperature(facts: CardFacts) -> str:
    fit = facts.training.get(TEMPERATURE_INFO_KEY)
    if not fit or not fit.get("applied"):
        return ""
    return (
        f" Temperature-scaled (T = {fit['temperature']:.3f}, fitted on {fit['examples']} eval "
        f"examples: calibration error {fit['calibration_error_before']:.4f} before, "
        f"{fit['calibration_error_after']:.4f} after)."
    )


def _class_counts(facts: CardFacts) -> str:
    """The eval split's examples per class, as the confusion matrix counted them."""
    if not facts.per_class:
        return ""
    return "; per class: " + ", ".join(f"{m.class_name} {m.examples}" for m in facts.per_class)


def _architecture(facts: CardFacts) -> str:
    info = facts.training
    if not info:
        return "Not recorded with the model."
    parts = [
        f"{info.get('model')}",
        f"trained {info.get('epochs')} epochs ({info.get('train_steps')} steps) with "
        f"{info.get('optimizer')}, peak learning rate {info.get('peak_learning_rate')}, "
        f"{info.get('learning_rate_decay')} decay, global batch {info.get('global_batch_size')}",
        f"on {info.get('strategy')}, {info.get('precision')} precision, "
        f"jit_compile={info.get('jit_compile')}",
        f"TensorFlow {info.get('tensorflow')}",
    ]
    if info.get("warm_started"):
        parts.append("warm-started from earlier weights")
    return "; ".join(parts) + "."


def performance_metrics(facts: CardFacts) -> list[dict[str, Any]]:
    """Overall metrics, then per class and per slice, calibration, then each served variant."""
    entries = [
        {
            "type": shown,
            "value": _count(facts.metrics[name])
            if name == "example_count"
            else facts.metrics[name],
        }
        for name, shown in CARD_METRICS.items()
        if name in facts.metrics
    ]
    for metrics in facts.per_class:
        for name in ("precision", "recall"):
            value = getattr(metrics, name)
            if value is not None:
                entries.append(
                    {"type": name, "value": value, "slice": f"class: {metrics.class_name}"}
                )
    for s in facts.slices:
        label = f"{s.kind}: {s.value}"
        entries.append({"type": "accuracy", "value": s.accuracy, "slice": label})
        entries.append({"type": "eval examples", "value": s.examples, "slice": label})
    if facts.calibration is not None:
        entries.append(
            {
                "type": "expected calibration error",
                "value": facts.calibration.expected_calibration_error,
            }
        )
    for variant in facts.variants:
        if variant.accuracy is not None:
            entries.append(
                {"type": f"accuracy of the {variant.name} variant", "value": variant.accuracy}
            )
    return entries


def _count(value: float) -> int:
    """TFMA keeps even example counts as floats."""
    return round(value)


def _considerations(facts: CardFacts) -> dict[str, Any]:
    return {
        "use_cases": [
            {
                "description": (
                    f"Naming which of the {facts.dataset.num_classes} classes an image of the "
                    f"kind it was trained on ({_image_shape(facts)}, {facts.dataset.name}) "
                    "shows, with a probability per class."
                )
            }
        ],
        "limitations": [{"description": text} for text in limitations(facts)],
        "tradeoffs": [{"description": text} for text in tradeoffs(facts)],
    }


def limitations(facts: CardFacts) -> list[str]:
    """What the recorded figures say the model does poorly or cannot vouch for."""
    found = [
        "It names one of its classes for any image, including images of another kind: "
        "`tpu-pipeline predict` compares a batch with the training data "
        "(assets.extra/drift_reference.json) and reports a shift, but the model itself "
        "does not refuse."
    ]
    overall = facts.metrics.get("accuracy")
    for s in facts.slices:
        if s.flagged and overall is not None:
            found.append(
                f"Accuracy on {s.kind} {s.value} is {s.accuracy:.4f} on {s.examples} eval "
                f"examples, {overall - s.accuracy:.4f} below the overall {overall:.4f} "
                f"(more than the margin of {facts.slice_rule.slice_margin})."
            )
    few = [m.class_name for m in facts.per_class if m.examples < FEW_EXAMPLES]
    if few:
        found.append(
            f"The eval split holds fewer than {FEW_EXAMPLES} examples of class(es) "
            f"{', '.join(few)}: their metrics are uncertain."
        )
    calibration = facts.calibration
    if calibration is not None and calibration.expected_calibration_error > LOOSE_CALIBRATION:
        found.append(
            f"Its probabilities are loosely calibrated: expected calibration error "
            f"{calibration.expected_calibration_error:.4f} on {calibration.examples} eval examples."
        )
    return found


def tradeoffs(facts: CardFacts) -> list[str]:
    """The served variants against the SavedModel: size, speed and accuracy."""
    found = []
    for variant in facts.variants:
        if variant.name == "saved_model":
            continue
        if not variant.published:
            found.append(f"The {variant.name} variant is not served: {variant.reason}.")
            continue
        figures = []
        if variant.accuracy is not None:
            figures.append(f"accuracy {variant.accuracy:.4f}")
        if variant.size_bytes is not None:
            figures.append(f"{variant.size_bytes / 1024:.1f} KB")
        if variant.latency_ms is not None:
            figures.append(f"{variant.latency_ms:.3f} ms per image")
        found.append(f"The {variant.name} TFLite variant ({variant.file}): {', '.join(figures)}.")
    return found
