"""The pipeline's node ids, apart from the wiring, so readers of a run import no TFX."""

from __future__ import annotations


class NodeIds:
    """The id of every node: ML Metadata, the run summary and the report find them by these.

    ExampleGen has one id whatever format it reads, so readers of a run need not
    know the format.
    """

    EXAMPLE_GEN = "ExampleGen"
    STATISTICS_GEN = "StatisticsGen"
    SCHEMA_GEN = "ImportSchemaGen"
    EXAMPLE_VALIDATOR = "ExampleValidator"
    DATA_GATE = "DataGate"
    TRANSFORM = "Transform"
    TUNER = "Tuner"
    TRAINER = "Trainer"
    SERVING_PACKAGER = "ServingPackager"
    EXPLAINER = "Explainer"
    BASELINE_RESOLVER = "latest_blessed_model_resolver"
    PREVIOUS_SPAN_STATISTICS = "previous_span_statistics_resolver"
    EVALUATOR = "Evaluator"
    SPAN_SHIFT_GATE = "SpanShiftGate"
    PUSHER = "Pusher"


# Where the served model is, the one the Evaluator judges and the Pusher publishes: the
# ServingPackager's output, else (`serving.package: false`) the Trainer's. (node, output)
SERVED_MODEL_OUTPUTS = ((NodeIds.SERVING_PACKAGER, "served_model"), (NodeIds.TRAINER, "model"))
