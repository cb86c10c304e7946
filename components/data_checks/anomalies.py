"""Reads what ExampleValidator found into one line per problem, and the error that stops a run."""

import os

from tensorflow_data_validation.utils import anomalies_util

from tpu_pipeline.common.tfx_api import Artifact, artifact_utils


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


def rejection_message(problems: list[str]) -> str:
    """The DataGate's error for `problems`: how many, then each (the run's why, everywhere)."""
    count = f"{len(problems)} problem{'' if len(problems) == 1 else 's'}"
    return f"data rejected: {count}: " + "; ".join(problems)
