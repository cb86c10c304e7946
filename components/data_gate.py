"""Stops the pipeline when ExampleValidator found anomalies.

ExampleValidator only records anomalies; Transform and the Trainer would go on
and train on the bad data. This gate sits between them: with any anomaly it
fails, naming every one, so nothing downstream runs and nothing is pushed.
"""

import os

from tensorflow_data_validation.utils import anomalies_util

from common.tfx_api import Artifact, ExampleAnomalies, InputArtifact, artifact_utils, component


class DataRejectedError(RuntimeError):
    """The data breaks the curated schema."""


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
def DataGate(anomalies: InputArtifact[ExampleAnomalies]) -> None:  # noqa: N802 (TFX names components in CamelCase)
    """Fails with every anomaly listed when the data breaks the schema."""
    problems = describe_anomalies(anomalies)
    if problems:
        raise DataRejectedError(
            f"data rejected: {len(problems)} schema anomal{'y' if len(problems) == 1 else 'ies'}: "
            + "; ".join(problems)
        )
