"""Stops the pipeline when ExampleValidator found anomalies, or the label mix drifted.

ExampleValidator only records anomalies; Transform and the Trainer would go on
and train on the bad data. This gate sits between them: with any anomaly, or a
label distribution that moved too far from the previous span's
(components/data_checks/), it fails, naming every problem, so nothing
downstream runs and nothing is pushed.
"""

import json
import os

from tpu_pipeline.common.tfx_api import (
    ExampleAnomalies,
    ExampleStatistics,
    InputArtifact,
    Parameter,
    Schema,
    component,
)
from tpu_pipeline.components.data_checks.anomalies import (
    DataRejectedError,
    describe_anomalies,
    rejection_message,
)
from tpu_pipeline.components.data_checks.label_drift import label_drift


@component
def DataGate(  # noqa: N802 (TFX names components in CamelCase)
    anomalies: InputArtifact[ExampleAnomalies],
    statistics: InputArtifact[ExampleStatistics],
    schema: InputArtifact[Schema],
    label_feature: Parameter[str],
    label_drift_threshold: Parameter[float],
    previous_statistics: InputArtifact[ExampleStatistics] = None,
    class_names: Parameter[str] = "[]",
) -> None:
    """Fails with every problem listed when the data breaks the schema or its labels drifted.

    Drift is checked when there are `previous_statistics` (none for the first
    span) and `label_drift_threshold` is above 0. `class_names` is a JSON list
    (`source.label_names`; empty without names) that names the class that drifted.
    """
    problems = describe_anomalies(anomalies)
    if previous_statistics is not None and label_drift_threshold > 0:
        schema_file = os.path.join(schema.uri, "schema.pbtxt")
        problems += label_drift(
            statistics,
            previous_statistics,
            schema_file,
            label_feature,
            label_drift_threshold,
            json.loads(class_names),
        )
    if problems:
        raise DataRejectedError(rejection_message(problems))
