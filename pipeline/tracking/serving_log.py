"""What serves, kept true in MLflow's model registry after a person changes it.

A run registers the version it pushes (mlflow_log.py). A person changes what serves
with `tpu-pipeline serving bless | rollback | pin | restore` (serving_ops/local/actions.py,
which knows nothing of trackers: it sits below this layer); once the action has
succeeded the command calls `record_serving`, which makes the registry say what the
serving folder now says:

- the version served now is a registered version: if the registry has none for it (a
  version a person blessed, or one pushed while the tracker was down), it is uploaded
  with a run of its own (`serving <action> <version>`, tagged with the action and its
  reason) and registered from there, `runs:/<run id>/model`, as a pushed version is;
- the registered model's `serving` alias points at it;
- each registered version's `serving_state` tag says `serving`, or why it was set aside
  (the note the serving folder keeps: action, reason, who).

The serving folder is the truth; the registry is only brought in line with it, so a
command that failed to reach the tracker is put right by the next one that does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time

from tpu_pipeline.common.config import TrackingConfig
from tpu_pipeline.pipeline.tracking.mlflow_log import (
    MODEL_ARTIFACT,
    SERVING,
    SERVING_ALIAS,
    SERVING_STATE_TAG,
    SERVING_VERSION_TAG,
    register_version,
    registered_model,
)
from tpu_pipeline.serving_ops.local.folder import Version, list_versions
from tpu_pipeline.serving_ops.protocol import operator_name

SOURCE_NAME = "tpu-pipeline serving"


@dataclasses.dataclass(frozen=True)
class ServingChange:
    """A serving action that succeeded: which, why, and the serving folder it changed."""

    action: str
    reason: str
    serving_dir: str


def _state(version: Version) -> str:
    """The `serving_state` tag of a version: serving, in place, or why it was set aside."""
    if version.serving:
        return SERVING
    note = version.note
    if not note:
        return "in place"
    reason = f": {note['reason']}" if note.get("reason") else ""
    return f"set aside by {note['action']} {note['when']} by {note['who']}{reason}"


def record_serving(
    client, change: ServingChange, tracking: TrackingConfig, pipeline: str
) -> list[str]:
    """Brings the registry in line with the serving folder after `change`; the lines saying
    what changed there.

    Raises:
      Whatever MLflow raises: the tracker is down, refuses, or answers too slowly.
    """
    name = registered_model(client, tracking, pipeline)
    registered = {}
    for found in client.search_model_versions(f"name='{name}'"):
        serving_version = found.tags.get(SERVING_VERSION_TAG)
        newest = registered.get(serving_version)
        if serving_version and (newest is None or int(found.version) > int(newest.version)):
            registered[serving_version] = found
    lines = []
    for version in list_versions(change.serving_dir):
        model_version = registered.get(version.version)
        if model_version is None and version.serving:
            model_version, source = _log_served(client, change, version, name, tracking, pipeline)
            lines.append(f"registered: {name} version {model_version.version} from {source}")
        elif model_version is None:
            continue
        state = _state(version)
        if model_version.tags.get(SERVING_STATE_TAG) != state:
            client.set_model_version_tag(name, model_version.version, SERVING_STATE_TAG, state)
        if version.serving:
            client.set_registered_model_alias(name, SERVING_ALIAS, model_version.version)
            lines.append(
                f"MLflow: {name}@{SERVING_ALIAS} is version {model_version.version} "
                f"(serving {version.version})"
            )
    return lines


def _log_served(
    client,
    change: ServingChange,
    version: Version,
    name: str,
    tracking: TrackingConfig,
    pipeline: str,
):
    """Uploads a served version the registry lacks with a run of its own and registers it."""
    from mlflow.entities import RunStatus

    experiment_name = tracking.experiment_for(pipeline)
    experiment = client.get_experiment_by_name(experiment_name)
    experiment_id = (
        experiment.experiment_id if experiment else client.create_experiment(experiment_name)
    )
    tags = {
        "serving_action": change.action,
        "serving_reason": change.reason,
        "serving_operator": operator_name(),
        "mlflow.source.name": SOURCE_NAME,
        "mlflow.source.type": "LOCAL",
    }
    run_name = f"serving {change.action} {version.version} {time.strftime('%Y-%m-%d %H:%M:%S')}"
    run_id = client.create_run(experiment_id, run_name=run_name, tags=tags).info.run_id
    try:
        client.log_artifacts(run_id, version.path, MODEL_ARTIFACT)
        how = f"by `serving {change.action}`" + (f" ({change.reason})" if change.reason else "")
        registered = register_version(
            client,
            name,
            run_id,
            version.path,
            version.version,
            {k: v for k, v in tags.items() if k.startswith("serving_")},
            f"Serving version {version.version}, served {how}",
        )
        client.set_terminated(run_id, RunStatus.to_string(RunStatus.FINISHED))
    except BaseException:
        with contextlib.suppress(Exception):  # the tracker may be the thing that failed
            client.set_terminated(run_id, RunStatus.to_string(RunStatus.FAILED))
        raise
    return registered
