"""`serving bless --vertex` recorded in Vertex ML Metadata, so the next run's baseline follows.

As locally (serving_ops/local/blessing.py): a `ManualBlessing` execution takes the
Model as input and outputs a new ModelBlessing (`blessed=1`, `current_model`,
`current_model_id` = the Model artifact's resource name, as the Vertex resolver
compares it, who and why) and a PushedModel whose `pushed_destination` is the
registry version's `artifact_uri`, so a later rollback finds this blessing the
way it finds a Pusher's (serving_ops/vertex/baseline.py). The execution and both
artifacts join the pipeline's context: Vertex names that context itself, so it
is read from the newest run's `job_detail.pipeline_context` rather than derived.

The Model artifact and the context are looked up before the registry moves (a
model Vertex ML Metadata does not know is refused with nothing changed); the
records are written after it, as locally: a blessing recorded for a model that
does not serve would move the baseline away from what serves. A failure there
leaves the bless's intent label on the version (serving_ops/vertex/actions.py),
and the next registry command records the blessing (the upload is not repeated;
a second blessing of the same model changes no baseline).

Assumed from the API reference, not observed: ListPipelineJobs' `pipeline_name`
filter (the compiled pipeline's name, `config.full_pipeline_name`), that the
Vertex resolver reads the blessings in that context, and that artifacts of
schema `tfx.*` and executions of `system.Run` are accepted without registering
a schema.
"""

from __future__ import annotations

import contextlib
import dataclasses
import posixpath
from collections.abc import Iterator

from tfx.utils.path_constants import SERVING_MODEL_DIR

from tpu_pipeline.common import vertex_types as gca
from tpu_pipeline.common.config import PipelineConfig, require_vertex
from tpu_pipeline.common.vertex_api import ApiCall
from tpu_pipeline.serving_ops.local.blessing import (
    BLESSED_BY_PROPERTY,
    EXECUTION_TYPE,
    REASON_PROPERTY,
)
from tpu_pipeline.serving_ops.vertex.aliases import Note, RegistryActionError
from tpu_pipeline.serving_ops.vertex.baseline import (
    MODEL_BLESSING,
    PUSHED_MODEL,
    Send,
    metadata_call,
    metadata_store,
)

MODEL = "tfx.Model"
EXECUTION_SCHEMA = "system.Run"


def model_artifact_uri(model_uri: str) -> str:
    """The Model artifact's URI for the Trainer's serving folder the person named."""
    stripped = model_uri.rstrip("/")
    return (
        posixpath.dirname(stripped)
        if posixpath.basename(stripped) == SERVING_MODEL_DIR
        else stripped
    )


def model_lookup_call(store: str, model_uri: str) -> ApiCall:
    request = gca.ListArtifactsRequest(
        parent=store, filter=f'schema_title="{MODEL}" AND uri="{model_artifact_uri(model_uri)}"'
    )
    return metadata_call("ListArtifacts", request)


def newest_run_call(config: PipelineConfig) -> ApiCall:
    request = gca.ListPipelineJobsRequest(
        parent=require_vertex(config).location,
        filter=f'pipeline_name="{config.full_pipeline_name}"',
        order_by="create_time desc",
        page_size=1,
    )
    return ApiCall("PipelineService.ListPipelineJobs", request)


def run_call(job_name: str) -> ApiCall:
    """GetPipelineJob: its job_detail names the pipeline's context."""
    return ApiCall("PipelineService.GetPipelineJob", gca.GetPipelineJobRequest(name=job_name))


def record_calls(
    store: str, model: gca.Artifact, model_uri: str, served_uri: str, reason: str, note: Note
) -> dict[str, ApiCall]:
    """The blessing's and the PushedModel's CreateArtifact, and the execution's CreateExecution."""
    blessing = gca.Artifact(
        schema_title=MODEL_BLESSING,
        display_name="blessing",
        state=gca.Artifact.State.LIVE,  # the resolver reads LIVE artifacts only
        metadata={
            "blessed": 1,
            "current_model": model.uri or model_artifact_uri(model_uri),
            "current_model_id": model.name,
            REASON_PROPERTY: reason,
            BLESSED_BY_PROPERTY: note.who,
        },
    )
    pushed = gca.Artifact(
        schema_title=PUSHED_MODEL,
        display_name="pushed_model",
        uri=served_uri,
        state=gca.Artifact.State.LIVE,
        metadata={"pushed": 1, "pushed_destination": served_uri},
    )
    execution = gca.Execution(
        schema_title=EXECUTION_SCHEMA,
        display_name=EXECUTION_TYPE,
        state=gca.Execution.State.COMPLETE,
        metadata={REASON_PROPERTY: reason, BLESSED_BY_PROPERTY: note.who},
    )
    return {
        "create_blessing": metadata_call(
            "CreateArtifact", gca.CreateArtifactRequest(parent=store, artifact=blessing)
        ),
        "create_pushed_model": metadata_call(
            "CreateArtifact", gca.CreateArtifactRequest(parent=store, artifact=pushed)
        ),
        "create_execution": metadata_call(
            "CreateExecution", gca.CreateExecutionRequest(parent=store, execution=execution)
        ),
    }


def link_calls(context: str, model: str, blessing: str, pushed: str, execution: str) -> dict:
    """The execution's events (Model in; blessing and PushedModel out), then the context."""
    events = [
        gca.Event(artifact=model, type_=gca.Event.Type.INPUT),
        gca.Event(artifact=blessing, type_=gca.Event.Type.OUTPUT),
        gca.Event(artifact=pushed, type_=gca.Event.Type.OUTPUT),
    ]
    context_request = gca.AddContextArtifactsAndExecutionsRequest(
        context=context, artifacts=[blessing, pushed], executions=[execution]
    )
    return {
        "add_events": metadata_call(
            "AddExecutionEvents", gca.AddExecutionEventsRequest(execution=execution, events=events)
        ),
        "add_to_pipeline_context": metadata_call(
            "AddContextArtifactsAndExecutions", context_request
        ),
    }


@dataclasses.dataclass(frozen=True)
class BlessingPlace:
    """Where a manual blessing is recorded: the store, the Model artifact, the pipeline context."""

    store: str
    model: gca.Artifact
    context: str


def find_place(config: PipelineConfig, model_uri: str, send: Send) -> BlessingPlace:
    """Looks up the Model artifact of `model_uri` and the pipeline's context, before anything moves.

    Raises:
      RegistryActionError: no such Model artifact or pipeline run, or a lookup failed.
    """
    store = metadata_store(config)
    with _one_line(f"{model_uri}: cannot read Vertex ML Metadata", "nothing was changed"):
        models = list(send(model_lookup_call(store, model_uri)))
        if not models:
            raise RegistryActionError(
                f"{model_uri}: Vertex ML Metadata has no Model artifact at "
                f"{model_artifact_uri(model_uri)}; give the Format-Serving folder of a run's "
                "Trainer"
            )
        runs = list(send(newest_run_call(config)))
        if not runs:
            raise RegistryActionError(
                f"{config.full_pipeline_name}: no Vertex AI pipeline run, so no pipeline context "
                "to record the blessing in"
            )
        context = send(run_call(runs[0].name)).job_detail.pipeline_context.name
    return BlessingPlace(store, models[0], context)


def record_blessing(
    place: BlessingPlace, model_uri: str, served_uri: str, reason: str, send: Send
) -> str:
    """Records the manual blessing of `model_uri`; returns the ModelBlessing's resource name.

    Raises:
      RegistryActionError: a call failed (one line: the model serves, and blessing
        again records it).
    """
    with _one_line(
        f"{model_uri}: serves, but Vertex ML Metadata did not record the blessing",
        "nothing is uploaded twice",
    ):
        calls = record_calls(place.store, place.model, model_uri, served_uri, reason, Note(None))
        blessing, pushed, execution = (send(call).name for call in calls.values())
        links = link_calls(place.context, place.model.name, blessing, pushed, execution)
        for call in links.values():
            send(call)
    return blessing


@contextlib.contextmanager
def _one_line(what: str, then: str) -> Iterator[None]:
    """Turns an API error into one RegistryActionError line: what failed, why, what next."""
    from google.api_core import exceptions

    try:
        yield
    except exceptions.GoogleAPIError as error:
        raise RegistryActionError(f"{what} ({error}); {then}") from None
