"""Stops the pipeline when ExampleValidator found anomalies, or the label mix drifted.

ExampleValidator only records anomalies; Transform and the Trainer would go on
and train on the bad data. This gate sits between them: with any anomaly, or a
label distribution that moved too far from the previous span's
(components/label_drift.py), it fails, naming every problem, so nothing
downstream runs and nothing is pushed.
"""

import os

from tensorflow_data_validation.utils import anomalies_util

from common.tfx_api import (
    Artifact,
    ExampleAnomalies,
    ExampleStatistics,
    InputArtifact,
    Parameter,
    Schema,
    artifact_utils,
    component,
)
from components.label_drift import label_drift


class DataRejectedError(RuntimeError):
    """The data breaks the curated schema, or its label mix drifted."""


def describe_anomalies(anomalies: Artifact) -> list[str]:
    """One line per anomaly: split, feature and TFDV's description."""
    problems: list[str] = []
    for split in artifact_utils.decode_split_names(anomalies.split_names):
        path = os.path.join(artifact_utils.get_split_uri([anomalies], split), "SchemaDiff.pb")
        found = anomalies_util.load_anomalies_binary(path)
        if found.HasField("dataset_anomaly_info"):
            info = found.dataset_anomaly_info
            problems.append(f"{split}: dataset: {info.short_description} ({info.description})")
        for feature, info in sorted(found.anomaly_info.items()):
            problems.append(f"{split}: {feature}: {info.short_description} ({info.description})")
    return problems


@component
def DataGate(  # noqa: N802 (TFX names components in CamelCase)
    anomalies: InputArtifact[ExampleAnomalies],
    statistics: InputArtifact[ExampleStatistics],
    schema: InputArtifact[Schema],
    label_feature: Parameter[str],
    label_drift_threshold: Parameter[float],
    previous_statistics: InputArtifact[ExampleStatistics] = None,
) -> None:
    """Fails with every problem listed when the data breaks the schema or its labels drifted.

    Drift is checked when there are `previous_statistics` (none for the first
    span) and `label_drift_threshold` is above 0.
    """
    problems = describe_anomalies(anomalies)
    if previous_statistics is not None and label_drift_threshold > 0:
        schema_file = os.path.join(schema.uri, "schema.pbtxt")
        problems += label_drift(
            statistics, previous_statistics, schema_file, label_feature, label_drift_threshold
        )
    if problems:
        raise DataRejectedError(
            f"data rejected: {len(problems)} problem{'' if len(problems) == 1 else 's'}: "
            + "; ".join(problems)
        )
