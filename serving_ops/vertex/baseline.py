"""On Vertex AI, the next run's baseline follows what the Model Registry serves.

TFX's LatestBlessedModelStrategy compiles for Vertex to two resolver queries
(tfx/orchestration/kubeflow/v2/step_builder.py): the newest ModelBlessing with
`state=LIVE AND metadata.blessed.number_value=1`, then the Model whose name is
that blessing's `current_model_id`. Vertex ML Metadata has no ABANDONED state
(Artifact.State is PENDING or LIVE), so a blessing is withdrawn through the
first query instead: `blessed` becomes 0, `tpu_pipeline_withdrawn_by` names
the version set aside (`<entry>@<id>`) and `tpu_pipeline_blessed_before` keeps
the verdict. Reinstating puts the verdict back and empties
`tpu_pipeline_withdrawn_by` (emptied, not removed: it reads the same whether
UpdateArtifact replaces the metadata or merges into it). Nothing is deleted.

As serving_ops/local/baseline.py does locally, this makes the metadata agree with
the registry: the blessings of every version labelled rolled back are
withdrawn, the withdrawn ones of every other version reinstated, and a refusal
stays a refusal. A version's blessings are found from what the registry Pusher
recorded: the folder a version was uploaded from (its `artifact_uri`) is its
PushedModel's `pushed_destination`, and the Pusher execution that output that
PushedModel took the ModelBlessing as an input (QueryArtifactLineageSubgraph,
read by its events, so how far a hop reaches does not matter). A manual
blessing (serving_ops/vertex/metadata_blessing.py) records its PushedModel the same way,
its ModelBlessing an output of the same execution.

`serving_ops/vertex/actions.py` calls this with the versions as the registry lists
them once the registry step is sent, before the action's intent is removed: when the
metadata cannot be written, the next registry command or registry Pusher finds the
intent and calls this again (what is written already agrees, and is not written
twice). Each UpdateArtifact carries the `etag` the blessing was read with; one another
writer changed meanwhile is refused, and that version's blessings are read again.

Assumed from the API reference, not observed (no network here): the filter
`metadata.<key>.string_value`, that a TFX artifact's custom properties are its
Vertex `metadata` keys (kubeflow_v2_entrypoint_utils), and that a registry
version's `artifact_uri` is the URI it was uploaded with.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from google.protobuf import field_mask_pb2

from tpu_pipeline.common import vertex_types as gca
from tpu_pipeline.common.config import PipelineConfig, require_vertex
from tpu_pipeline.common.vertex_api import ApiCall
from tpu_pipeline.serving_ops.vertex.entry import RegistryActionError, is_rolled_back
from tpu_pipeline.serving_ops.vertex.transport import conflict_errors

PUSHED_MODEL = "tfx.PushedModel"
MODEL_BLESSING = "tfx.ModelBlessing"
BLESSED_KEY = "blessed"  # what the resolver's query reads (TFX's ARTIFACT_PROPERTY_BLESSED_KEY)
WITHDRAWN_BY_KEY = "tpu_pipeline_withdrawn_by"
BLESSED_BEFORE_KEY = "tpu_pipeline_blessed_before"
# How many times a version's blessings are read again after a refused conditional write.
UPDATE_ATTEMPTS = 4

Send = Callable[[ApiCall], Any]


class BaselineError(RegistryActionError):
    """Vertex ML Metadata could not be read or written (names the version and the artifact)."""


def metadata_call(method: str, request: Any) -> ApiCall:
    """One MetadataService call."""
    return ApiCall(f"MetadataService.{method}", request)


def metadata_store(config: PipelineConfig) -> str:
    """The project's metadata store in the region, the one Vertex AI Pipelines writes."""
    return store_in(require_vertex(config).location)


def store_in(location: str) -> str:
    """The metadata store of `projects/P/locations/R`."""
    return f"{location}/metadataStores/default"


def pushed_models_call(store: str, destination: str) -> ApiCall:
    """MetadataService.ListArtifacts of the PushedModels pushed to `destination`."""
    request = gca.ListArtifactsRequest(
        parent=store,
        filter=(
            f'schema_title="{PUSHED_MODEL}" AND '
            f'metadata.pushed_destination.string_value="{destination}"'
        ),
    )
    return metadata_call("ListArtifacts", request)


def lineage_call(artifact_name: str) -> ApiCall:
    """The Pusher execution that output the artifact, and that execution's inputs."""
    request = gca.QueryArtifactLineageSubgraphRequest(artifact=artifact_name, max_hops=2)
    return metadata_call("QueryArtifactLineageSubgraph", request)


def pushed_blessings(subgraph: gca.LineageSubgraph, pushed_name: str) -> list[gca.Artifact]:
    """The ModelBlessings of the executions that output `pushed_name`.

    A Pusher takes its blessing as an input; a manual blessing
    (serving_ops/vertex/metadata_blessing.py) outputs it beside the PushedModel.
    """
    pushers = {
        event.execution
        for event in subgraph.events
        if event.artifact == pushed_name and event.type_ == gca.Event.Type.OUTPUT
    }
    linked = {event.artifact for event in subgraph.events if event.execution in pushers}
    return [a for a in subgraph.artifacts if a.name in linked and a.schema_title == MODEL_BLESSING]


def is_withdrawn(blessing: gca.Artifact) -> bool:
    return bool(blessing.metadata.get(WITHDRAWN_BY_KEY))


def blessing_call(blessing: gca.Artifact, set_aside_as: str | None) -> ApiCall | None:
    """The UpdateArtifact that makes `blessing` agree with its version, None if it does.

    Args:
      blessing: a ModelBlessing as Vertex ML Metadata returns it.
      set_aside_as: the version (`<entry>@<id>`) when it is rolled back, else None.
    """
    metadata = dict(blessing.metadata)
    if set_aside_as and not is_withdrawn(blessing):
        metadata.update(
            {
                BLESSED_BEFORE_KEY: metadata.get(BLESSED_KEY, 0),
                BLESSED_KEY: 0,
                WITHDRAWN_BY_KEY: set_aside_as,
            }
        )
    elif not set_aside_as and is_withdrawn(blessing):
        metadata.update({BLESSED_KEY: metadata.get(BLESSED_BEFORE_KEY, 0), WITHDRAWN_BY_KEY: ""})
    else:
        return None
    request = gca.UpdateArtifactRequest(
        artifact=gca.Artifact(name=blessing.name, metadata=metadata, etag=blessing.etag),
        update_mask=field_mask_pb2.FieldMask(paths=["metadata"]),
    )
    return metadata_call("UpdateArtifact", request)


def follow_registry(
    store: str, model_name: str, versions: Sequence[gca.Model], send: Send
) -> dict[str, list[str]]:
    """Withdraws the blessings of rolled-back versions, reinstates those of the others.

    Returns the blessings' resource names changed, under "withdrawn" and "reinstated".

    Raises:
      BaselineError: a lookup or an update failed (the line names the version).
    """
    from google.api_core import exceptions

    changed: dict[str, list[str]] = {"withdrawn": [], "reinstated": []}
    for version in versions:
        name = f"{model_name}@{version.version_id}"
        set_aside_as = name if is_rolled_back(version.labels) else None
        try:
            for attempt in range(UPDATE_ATTEMPTS):
                try:
                    for blessing in _version_blessings(store, version.artifact_uri, send):
                        call = blessing_call(blessing, set_aside_as)
                        if call is not None:
                            send(call)
                            what = "withdrawn" if set_aside_as else "reinstated"
                            changed[what].append(blessing.name)
                    break
                except conflict_errors():  # changed since it was read: read it again
                    if attempt == UPDATE_ATTEMPTS - 1:
                        raise
        except exceptions.GoogleAPIError as error:
            raise BaselineError(f"{name}: Vertex ML Metadata did not follow ({error})") from None
    return changed


def _version_blessings(store: str, artifact_uri: str, send: Send) -> list[gca.Artifact]:
    """The ModelBlessings the Pusher took for each PushedModel pushed to `artifact_uri`."""
    found: dict[str, gca.Artifact] = {}
    for pushed in send(pushed_models_call(store, artifact_uri)):
        for blessing in pushed_blessings(send(lineage_call(pushed.name)), pushed.name):
            found[blessing.name] = blessing
    return list(found.values())
